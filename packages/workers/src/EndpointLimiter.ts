/**
 * The EndpointLimiter Durable Object: one per limited webhook endpoint (named `tenant/endpoint`), so the
 * endpoint's `max_per_second` and `max_in_flight` hold across isolates and concurrent consumer invocations.
 * The state (grant times within the last second, leases on delivery ids) is core's `EndpointLimiter`; this
 * object keeps it in memory and in its storage (written with every change, read once on start — an object
 * evicted mid-POST still knows its leases), and supplies the clock. Each call is one turn of the object, so
 * concurrent asks are answered one after another: never two grants of one slot.
 */
import { DurableObject } from "cloudflare:workers"
import { EndpointLimiter as Limiter } from "@factline/core/runtime"
import type { PlatformEnv } from "./Env.js"

const key = "state"

export class EndpointLimiter extends DurableObject<PlatformEnv> implements Limiter.EndpointLimiterRpc {
  private state: Limiter.State = Limiter.empty()

  constructor(ctx: DurableObjectState, env: PlatformEnv) {
    super(ctx, env)
    void ctx.blockConcurrencyWhile(async () => {
      this.state = (await ctx.storage.get<Limiter.State>(key)) ?? Limiter.empty()
    })
  }

  async acquire(limits: Limiter.Limits, ids: ReadonlyArray<string>): Promise<Limiter.Grant> {
    const { state, grant } = Limiter.acquire(this.state, limits, ids, Date.now())
    this.keep(state)
    return grant
  }

  async release(ids: ReadonlyArray<string>): Promise<void> {
    this.keep(Limiter.release(this.state, ids, Date.now()))
  }

  /** In memory at once; in storage before the answer leaves (the output gate holds it until written). */
  private keep(state: Limiter.State) {
    this.state = state
    void this.ctx.storage.put(key, state)
  }
}
