/**
 * `makePlatform(modules)`: a whole factline Worker from a product team's modules.
 *
 * Returns `{ fetch, queue, scheduled }`: the HTTP API, the queue dispatcher
 * (by `batch.queue`: the events consumer, the DLQ consumers, the platform
 * queues) and the scheduled maintenance. The router is built here, at module
 * load, so a misconfiguration (two handlers for one type) fails the deploy, not
 * a message. Export the LedgerShard class beside it from the Worker's entry.
 */
import { Effect } from "effect"
import {
  AcceptedKeys,
  BatchConsumer,
  Consumer,
  DeadLetterConsumer,
  EventsConsumer,
  type LedgerProtocol,
  ProcessingConsumer,
  ProjectionConsumer,
  RetryPolicy,
  Router,
  type Module
} from "@factline/core"
import type { PlatformEnv } from "./Env.js"
import * as Api from "./http/Api.js"
import * as Services from "./Services.js"

/** Inbox rows (batch queue) older than this are pruned by the scheduled handler (DESIGN: ≥ 30 days). */
export const inboxRetentionDays = 30
/**
 * Accepted idempotency keys (`accepted_keys`) are forgotten after as long as the inbox keeps its rows:
 * within it, a key stays bound to its payload (a retry with another payload is a conflict).
 */
export const acceptedKeysRetentionDays = 30
/** Keys pruned per scheduled run at most (oldest first); a backlog is worked off over the next runs. */
export const acceptedKeysPrunedPerRun = 5_000
/** A shard whose relay has been failing for this long is re-armed by the sweep. */
export const staleRelayMinutes = 5
export const shardsPerSweep = 200

export interface Platform {
  readonly router: Router.Router
  readonly fetch: (request: Request, env: PlatformEnv, ctx: ExecutionContext) => Promise<Response>
  readonly queue: (batch: MessageBatch<unknown>, env: PlatformEnv, ctx: ExecutionContext) => Promise<void>
  readonly scheduled: (controller: ScheduledController, env: PlatformEnv, ctx: ExecutionContext) => Promise<void>
}

const delayScale = (env: PlatformEnv): number => {
  const n = Number(env.FACTLINE_RETRY_DELAY_SCALE ?? "1")
  return Number.isFinite(n) && n >= 0 ? n : 1
}

/**
 * A platform queue whose consumer is not built yet (webhook delivery): its
 * messages are never acked silently — each is dead-lettered with the reason,
 * so it stays available for replay once the consumer exists.
 */
const notYetConsumed = (policy: RetryPolicy.RetryPolicy, batch: MessageBatch<unknown>) =>
  Consumer.run(
    {
      policy,
      decode: () =>
        Effect.fail<Consumer.Rejection>({ reason: "permanent_failure", error: `${policy.queue} has no consumer yet; kept in its dead-letter queue for replay` }),
      process: () => Effect.succeed(new Map<string, Consumer.Outcome>())
    },
    batch
  )

export const makePlatform = (modules: ReadonlyArray<Module.Module>): Platform => {
  const router = Router.make(modules)
  const api = Api.make(router)

  return {
    router,
    fetch: (request, env, ctx) => Promise.resolve(api.fetch(request, env, ctx)),
    queue: async (batch, env) => {
      const queue = batch.queue
      if (RetryPolicy.isDeadLetterQueue(queue)) {
        return Effect.runPromise(DeadLetterConsumer.consume(env.DB, batch))
      }
      const policy = RetryPolicy.forQueue(queue)
      if (!policy) {
        // A queue this Worker does not know: retry (never drop) so the misconfiguration is visible.
        console.error(`no consumer for queue ${queue}`)
        for (const m of batch.messages) m.retry({ delaySeconds: 60 })
        return
      }
      const options = { delayScale: delayScale(env) }
      const program: Effect.Effect<unknown, never, Services.ConsumerServices> = policy === RetryPolicy.events
        ? EventsConsumer.consume(router, batch, options)
        : policy === RetryPolicy.projections
          ? ProjectionConsumer.consume(router, batch, options)
          : policy === RetryPolicy.factProcessing
            ? ProcessingConsumer.consume(router, batch, options)
            : policy === RetryPolicy.batch
              ? BatchConsumer.consume(router, batch, async (next) => void (await env.BATCH_QUEUE.send(next, { contentType: "json" })), options)
              : notYetConsumed(policy, batch)
      await Effect.runPromise(program.pipe(Effect.provide(Services.consumerLayer(env))))
    },
    scheduled: async (_controller, env) => {
      await sweepStaleRelays(env)
      const cutoff = new Date(Date.now() - inboxRetentionDays * 24 * 3600 * 1000).toISOString()
      await env.DB.prepare("DELETE FROM inbox WHERE status = 'succeeded' AND updated_at < ?").bind(cutoff).run()
      await pruneAcceptedKeys(env)
    }
  }
}

/** Forgets accepted idempotency keys past their retention, oldest first, at most `limit`; returns how many. */
export const pruneAcceptedKeys = (env: PlatformEnv, options: { readonly now?: Date; readonly limit?: number } = {}): Promise<number> => {
  const cutoff = new Date((options.now ?? new Date()).getTime() - acceptedKeysRetentionDays * 24 * 3600 * 1000).toISOString()
  return Effect.runPromise(AcceptedKeys.make(env.DB).prune(cutoff, options.limit ?? acceptedKeysPrunedPerRun))
}

/** Re-arms the relay of every shard whose outbox has been pending too long. Returns how many were re-armed. */
export const sweepStaleRelays = async (env: PlatformEnv): Promise<number> => {
  const cutoff = new Date(Date.now() - staleRelayMinutes * 60_000).toISOString()
  const { results } = await env.DB.prepare(
    "SELECT shard_key FROM ledger_shards WHERE relay_pending_since IS NOT NULL AND relay_pending_since <= ? ORDER BY relay_pending_since LIMIT ?"
  ).bind(cutoff, shardsPerSweep).all<{ shard_key: string }>()
  await Promise.all(results.map(async ({ shard_key }) => {
    const stub = env.LEDGER.get(env.LEDGER.idFromName(shard_key)) as unknown as LedgerProtocol.LedgerShardRpc & { relayNow(shardKey: string): Promise<number> }
    await stub.relayNow(shard_key)
  }))
  return results.length
}
