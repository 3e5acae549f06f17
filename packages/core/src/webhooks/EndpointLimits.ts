/**
 * The webhook consumer's door to the endpoints' limiters: one call per limited endpoint per batch to ask for
 * its deliveries (`acquire`) and one to give the slots back after the POSTs (`release`). Live, each endpoint
 * is one Durable Object (`EndpointLimiter` in `@factline/workers`, named `tenant/endpoint`) holding the state
 * of `EndpointLimiter.ts` across isolates; in the Node test kit, the same state in memory. An endpoint
 * without limits is never asked (no call at all).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { tenantKey } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import * as EndpointLimiter from "./EndpointLimiter.js"

export interface Shape {
  readonly acquire: (tenantId: string, endpointId: string, limits: EndpointLimiter.Limits, ids: ReadonlyArray<string>) => Effect.Effect<EndpointLimiter.Grant, Failure.Unavailable>
  readonly release: (tenantId: string, endpointId: string, ids: ReadonlyArray<string>) => Effect.Effect<void, Failure.Unavailable>
}

const unavailable = (cause: unknown) =>
  new Failure.Unavailable({ service: "the endpoint's rate limiter", message: `the endpoint's rate limiter did not answer: ${cause instanceof Error ? cause.message : String(cause)}` })

export class EndpointLimits extends Context.Service<EndpointLimits, Shape>()("@factline/core/EndpointLimits") {
  /**
   * Over the limiters' Durable Object namespace. Without one bound, an endpoint with limits cannot be
   * delivered to (its deliveries retry, naming the missing binding); endpoints without limits are unaffected.
   */
  static readonly layer = (namespace: EndpointLimiter.EndpointLimiterNamespace | undefined) =>
    Layer.succeed(EndpointLimits, {
      acquire: Effect.fn("EndpointLimits.acquire")(function*(tenantId, endpointId, limits, ids) {
        if (namespace === undefined) return yield* unavailable("no Durable Object namespace is bound for it (WEBHOOK_LIMITER, class EndpointLimiter)")
        const stub = namespace.get(namespace.idFromName(tenantKey(tenantId, endpointId)))
        return yield* Effect.tryPromise({ try: () => stub.acquire(limits, ids), catch: unavailable })
      }),
      release: Effect.fn("EndpointLimits.release")(function*(tenantId, endpointId, ids) {
        if (namespace === undefined || ids.length === 0) return
        const stub = namespace.get(namespace.idFromName(tenantKey(tenantId, endpointId)))
        yield* Effect.tryPromise({ try: () => stub.release(ids), catch: unavailable })
      })
    })

  /** Each endpoint's state in this process, on the clock of the program (the Node test kit). */
  static readonly memory = () => {
    const states = new Map<string, EndpointLimiter.State>()
    return Layer.succeed(EndpointLimits, {
      acquire: (tenantId, endpointId, limits, ids) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const key = tenantKey(tenantId, endpointId)
          const { grant, state } = EndpointLimiter.acquire(states.get(key) ?? EndpointLimiter.empty(), limits, ids, now)
          states.set(key, state)
          return grant
        }),
      release: (tenantId, endpointId, ids) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const key = tenantKey(tenantId, endpointId)
          states.set(key, EndpointLimiter.release(states.get(key) ?? EndpointLimiter.empty(), ids, now))
        })
    })
  }
}
