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
  BatchJobs,
  Consumer,
  DeadLetterConsumer,
  EventsConsumer,
  Failure,
  type LedgerProtocol,
  type Module,
  ProcessingConsumer,
  ProjectionConsumer,
  Metrics,
  ProjectionStore,
  Registry,
  RetryPolicy,
  WebhookConsumer
} from "@factline/core"
import type { PlatformEnv } from "./Env.js"
import * as Api from "./http/Api.js"
import * as Services from "./Services.js"

/** Inbox rows (batch queue) older than this are pruned by the scheduled handler (DESIGN: ≥ 30 days). */
export const inboxRetentionDays = 30
/** Resolved dead letters (replayed, skipped, escalated) are kept this long; open ones never expire. */
export const deadLetterRetentionDays = 30
/** The per-minute metrics rollup is kept this long. */
export const metricsRetentionDays = 14
/** Rows each retention pass deletes per table and run, so one cron run stays short. */
export const retentionChunk = 5_000
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
  /** The registry built from the modules (checked at module load). */
  readonly registry: Registry.Shape
  /** The runtime of these bindings: one per isolate, shared by every request and batch. */
  readonly runtime: (env: PlatformEnv) => Services.PlatformRuntime
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
        Effect.fail(new Failure.PermanentError({ message: `${policy.queue} has no consumer yet; kept in its dead-letter queue for replay` })),
      process: () => Effect.succeed(new Map<string, Consumer.Outcome>())
    },
    batch
  )

export const makePlatform = (modules: ReadonlyArray<Module.Module>): Platform => {
  const registry = Registry.make(modules)
  const runtime = Services.runtimes(registry)
  const api = Api.make(registry, runtime)

  return {
    registry,
    runtime,
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
      const log = env.FACTLINE_LOG_ATTEMPTS === "failures" || env.FACTLINE_LOG_ATTEMPTS === "none" ? env.FACTLINE_LOG_ATTEMPTS : "all"
      const options = { delayScale: delayScale(env), log } as const
      const started = Date.now()
      const program: Effect.Effect<unknown, never, Services.PlatformServices> = policy === RetryPolicy.events
        ? EventsConsumer.consume(batch, options)
        : policy === RetryPolicy.projections
          ? ProjectionConsumer.consume(batch, options)
          : policy === RetryPolicy.factProcessing
            ? ProcessingConsumer.consume(batch, options)
            : policy === RetryPolicy.batch
              ? BatchConsumer.consume(batch, async (next) => void (await env.BATCH_QUEUE.send(next, { contentType: "json" })), options)
              : policy === RetryPolicy.webhooks
                ? WebhookConsumer.consume(batch, { ...options, disableAfterMs: Services.webhookDisableAfterMs(env) })
                : notYetConsumed(policy, batch)
      const counts = (await runtime(env).runPromise(program)) as { acked?: number; retried?: number; deadLettered?: number } | undefined
      await recordMetrics(env, batch, counts, Date.now() - started)
    },
    scheduled: async (_controller, env) => {
      await sweepStaleRelays(env)
      const cutoff = new Date(Date.now() - inboxRetentionDays * 24 * 3600 * 1000).toISOString()
      await env.DB.prepare(
        "DELETE FROM inbox WHERE rowid IN (SELECT rowid FROM inbox WHERE status = 'succeeded' AND updated_at < ? ORDER BY updated_at LIMIT ?)"
      ).bind(cutoff, retentionChunk).run()
      await pruneAcceptedKeys(env)
      await pruneOperations(env)
      await failStaleBatchJobs(env)
    }
  }
}

/**
 * One metrics sample per consumer batch: one upsert of the D1 rollup (and one Analytics Engine data point
 * when the `METRICS` binding is configured). A failure to record is logged, never fails the batch.
 */
export const recordMetrics = async (
  env: PlatformEnv,
  batch: MessageBatch<unknown>,
  counts: { acked?: number; retried?: number; deadLettered?: number } | undefined,
  durationMs: number
) => {
  const now = Date.now()
  const lagsMs = batch.messages.map((m) => {
    const created = typeof m.body === "object" && m.body !== null ? (m.body as { created_at?: unknown }).created_at : undefined
    const at = typeof created === "string" ? Date.parse(created) : NaN
    return Math.max(0, now - (Number.isNaN(at) ? new Date(m.timestamp).getTime() : at))
  })
  const sample: Metrics.Sample = {
    queue: batch.queue,
    received: batch.messages.length,
    acked: counts?.acked ?? 0,
    retried: counts?.retried ?? 0,
    deadLettered: counts?.deadLettered ?? 0,
    durationMs,
    lagsMs
  }
  try {
    const { sql, params } = Metrics.upsert(sample, new Date(now))
    await env.DB.prepare(sql).bind(...params).run()
    env.METRICS?.writeDataPoint(Metrics.dataPoint(sample))
  } catch (error) {
    console.error(JSON.stringify({ level: "error", message: "queue metrics could not be recorded", queue: batch.queue, error: error instanceof Error ? error.message : String(error) }))
  }
}

/** Fails batch jobs without progress for `BatchJobs.staleAfterMs` (their chunk message is lost); returns how many. */
export const failStaleBatchJobs = (env: PlatformEnv, now = Date.now()): Promise<number> =>
  Effect.runPromise(BatchJobs.failStale(new Date(now - BatchJobs.staleAfterMs).toISOString(), new Date(now).toISOString()).pipe(
    Effect.provide(ProjectionStore.ProjectionStore.layer(env.DB)),
    Effect.catch((error) => Effect.as(Effect.logError(`stale batch jobs could not be failed: ${error.message}`), 0))
  ))

/** Deletes at most `retentionChunk` rows per table: resolved dead letters, old rollups. Returns what it deleted. */
export const pruneOperations = async (env: PlatformEnv, now = Date.now()) => {
  const days = (n: number) => new Date(now - n * 24 * 3600 * 1000).toISOString()
  const [dead, metrics] = await env.DB.batch([
    env.DB.prepare(
      `DELETE FROM dead_messages WHERE id IN (SELECT id FROM dead_messages
         WHERE status IN ('replayed', 'skipped', 'escalated') AND resolved_at < ? ORDER BY resolved_at LIMIT ?)`
    ).bind(days(deadLetterRetentionDays), retentionChunk),
    env.DB.prepare(
      "DELETE FROM queue_metrics WHERE rowid IN (SELECT rowid FROM queue_metrics WHERE minute < ? ORDER BY minute LIMIT ?)"
    ).bind(days(metricsRetentionDays), retentionChunk)
  ])
  return { deadLetters: dead?.meta.changes ?? 0, metrics: metrics?.meta.changes ?? 0 }
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
