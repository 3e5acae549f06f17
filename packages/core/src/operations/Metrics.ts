/**
 * Queue metrics with seed 001's names, recorded once per consumer batch —
 * never a write per message — and the health view computed from them.
 *
 * A batch's sample (received, acked, retried, dead-lettered by reason,
 * processing time, batch size, depth, lag = now − each message's
 * `created_at`) becomes a rollup of its queue's minute (`MetricsTally.Rollup`),
 * upserted into the D1 table `queue_metrics` (per queue per minute; histograms
 * merged in SQL), and, when the Worker has an Analytics Engine binding, one
 * data point there at once (the production path, queryable with its SQL API).
 * The isolate's tally keeps clean batches' rollups and the messages sent, and
 * writes them in one round trip at most every `FACTLINE_METRICS_FLUSH_SECONDS`
 * (default 10; 0: every batch) — at once for a batch with a retry or a dead
 * letter. Health reads the rollup over a window and grades each queue against
 * seed 001's thresholds. The names, labels and where each is recorded:
 * docs/operating.md.
 */
import { and, inArray, lt } from "drizzle-orm"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as QueueGroups from "../consuming/QueueGroups.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import { AnalyticsEngine } from "../platform/Bindings.js"
import { Queues } from "../platform/Queues.js"
import * as Sql from "../platform/Sql.js"
import * as Placement from "../placement/Placement.js"
import { deadMessages } from "../tables/PlatformTables.js"
import { countedAs, MetricsTally } from "./MetricsTally.js"
import { type Sample, dataPoint, rollupOf, sentDataPoint, sentUpsert, upsert } from "./MetricsModel.js"
import { type Backlog, OpenCount, ReasonCount, RollupRow, health } from "./MetricsHealth.js"

export { type Sample, batchSizeBounds, dataPoint, dataPointDoubles, durationBoundsMs, histogram, lagBoundsMs, rollupOf, sentDataPoint, sentUpsert, upsert } from "./MetricsModel.js"
export { type Backlog, type GroupBacklog, type Level, type QueueHealth, RollupRow, backlogAgeThresholds, health, overall, quantile, thresholds } from "./MetricsHealth.js"

/**
 * A consumer batch's sample: counts from its outcome, lag from each message's `created_at` (or its enqueue
 * time), depth from the backlog the queue reported with the batch.
 *
 * Depth is the queue's own backlog count, not sent − consumed: a difference of two counters never heals
 * from one lost count (an isolate evicted before its sends were written, a message that expired or was
 * dead-lettered by the platform), and it would mix up redeliveries; the backlog comes with every batch at no
 * cost and is what the queue itself will still deliver.
 */
export const sampleOf = (
  /** `queue`: the queue the batch came from (a group queue is recorded under its purpose, with its group). */
  batch: Pick<MessageBatch<unknown>, "queue" | "messages"> & { readonly metadata?: Partial<MessageBatchMetadata> | undefined },
  counts: {
    readonly acked?: number
    readonly retried?: number
    readonly deadLettered?: number
    readonly deadLetteredByReason?: Readonly<Record<string, number>>
  } | undefined,
  durationMs: number,
  now: number
): Sample => ({
  queue: QueueGroups.purposeOf(batch.queue),
  group: QueueGroups.parse(batch.queue)?.group,
  received: batch.messages.length,
  acked: counts?.acked ?? 0,
  retried: counts?.retried ?? 0,
  deadLettered: counts?.deadLettered ?? 0,
  deadLetteredByReason: counts?.deadLetteredByReason ?? {},
  depth: typeof batch.metadata?.metrics?.backlogCount === "number" ? batch.metadata.metrics.backlogCount : null,
  durationMs,
  lagsMs: batch.messages.map((m) => {
    const created = typeof m.body === "object" && m.body !== null ? (m.body as { created_at?: unknown }).created_at : undefined
    const at = typeof created === "string" ? Date.parse(created) : NaN
    return Math.max(0, now - (Number.isNaN(at) ? m.timestamp.getTime() : at))
  })
})

/**
 * Writes what the tally holds — the rollups waiting and the messages sent — in one round trip (a statement
 * per queue and minute), then the sent counts' Analytics Engine points (`ownPoint`: a sample's point, which
 * carries its own queue's sends). A failure is logged, never the caller's failure: the counts go back to
 * the tally for the next write.
 */
const write = (ownPoint?: Sample) =>
  Effect.gen(function*() {
    const sql = yield* Sql.PlatformDatabase
    const analytics = yield* AnalyticsEngine
    const tally = yield* MetricsTally
    const now = yield* Clock.currentTimeMillis
    tally.lastFlushMs = now
    const rollups = tally.drainRollups()
    const sent = tally.drain()
    const at = new Date(now)
    const statements = [...rollups.map(upsert), ...[...sent].map(([queue, n]) => sentUpsert(queue, n, at))].map((s) => Sql.statement(s.sql, ...s.params))
    const points = [
      ...(ownPoint === undefined ? [] : [dataPoint(ownPoint, sent.get(ownPoint.queue) ?? 0)]),
      ...[...sent].filter(([queue]) => queue !== ownPoint?.queue).map(([queue, n]) => sentDataPoint(queue, n))
    ]
    // Never empty: `record` has just added a rollup, `flushPending` writes only a tally that holds something.
    // One statement alone is a `run`; more, one `batch`: one round trip either way.
    const written: Effect.Effect<unknown, Sql.SqlFailure> = statements.length === 1 ? sql.run(statements[0]!) : sql.batch(statements)
    yield* written.pipe(
      Effect.andThen(Effect.forEach(points, (p) => analytics.writeDataPoint(p), { discard: true })),
      Effect.catch((error) =>
        Effect.sync(() => {
          tally.restoreRollups(rollups)
          tally.restore(sent)
        }).pipe(
          Effect.andThen(Effect.logError("queue metrics could not be recorded")),
          Effect.annotateLogs({ queue: ownPoint?.queue ?? "(pending)", error: error.message })
        ))
    )
  })

/**
 * Records one consumer batch's sample: its rollup joins the tally, its Analytics Engine point is written at
 * once. The tally is written (one round trip, `write`) when the batch retried or dead-lettered a message,
 * when the isolate has not written it for `FACTLINE_METRICS_FLUSH_SECONDS` (an isolate's first batch
 * included), or always with `flushMs` 0 (the default here; the Worker passes the setting); else the batch
 * costs no round trip. An isolate evicted between
 * two writes loses the clean batches' counts since the last one (at most the interval's); Analytics Engine
 * has every batch. A failure to record is logged, never the batch's failure.
 */
export const record = Effect.fn("Metrics.record")(function*(sample: Sample, metricsFlushMs: number = 0) {
  const tally = yield* MetricsTally
  const now = yield* Clock.currentTimeMillis
  tally.addRollup(rollupOf(sample, new Date(now)))
  const due = metricsFlushMs === 0 || sample.retried > 0 || sample.deadLettered > 0 || now - tally.lastFlushMs >= metricsFlushMs
  if (due) return yield* write(sample)
  const analytics = yield* AnalyticsEngine
  yield* analytics.writeDataPoint(dataPoint(sample, 0))
})

/**
 * Writes messages sent outside the platform runtime's tally — the ledger shard's outbox relay, a Durable
 * Object of its own — to the rollup at once (one round trip; the relay is the rare fallback path) and to
 * Analytics Engine, each under the queue it counts as (`MetricsTally.countedAs`: a group queue as its
 * purpose). A failure is logged, never the caller's: the messages were sent.
 */
export const recordSent = Effect.fn("Metrics.recordSent")(function*(sent: ReadonlyMap<string, number>) {
  const counted = new Map<string, number>()
  for (const [queue, n] of sent) {
    const as = countedAs(queue)
    if (as !== undefined && n > 0) counted.set(as, (counted.get(as) ?? 0) + n)
  }
  if (counted.size === 0) return
  const sql = yield* Sql.PlatformDatabase
  const analytics = yield* AnalyticsEngine
  const at = new Date(yield* Clock.currentTimeMillis)
  const statements = [...counted].map(([queue, n]) => sentUpsert(queue, n, at)).map((s) => Sql.statement(s.sql, ...s.params))
  const written: Effect.Effect<unknown, Sql.SqlFailure> = statements.length === 1 ? sql.run(statements[0]!) : sql.batch(statements)
  yield* written.pipe(
    Effect.andThen(Effect.forEach(counted, ([queue, n]) => analytics.writeDataPoint(sentDataPoint(queue, n)), { discard: true })),
    Effect.catch((error) => Effect.logError(`messages sent could not be recorded: ${error.message}`))
  )
})

/** Writes the sends the runtime's tally holds (`recordSent`): the ledger shard's, counted by its queues' door, after each relay. */
export const recordTallied = Effect.fn("Metrics.recordTallied")(function*() {
  const sent = (yield* MetricsTally).drain()
  if (sent.size > 0) yield* recordSent(sent)
})

/** How often, at least, the HTTP edge and the cron leave the tally to consumer batches (`flushPending`). */
export const edgeFlushIntervalMs = 10_000

/**
 * Writes the tally (rollups waiting, messages sent) when it holds something and was last written at least
 * `metricsFlushMs` ago; else nothing — it waits for the next consumer batch or call past the interval. The
 * Worker runs it after each HTTP response (`waitUntil`) and on the cron, with the larger of
 * `edgeFlushIntervalMs` and `FACTLINE_METRICS_FLUSH_SECONDS`, so an idle isolate's last counts are not held
 * back and a busy edge does not write per request; a failure is logged and the counts go back.
 */
export const flushPending = Effect.fn("Metrics.flushPending")(function*(metricsFlushMs: number) {
  const tally = yield* MetricsTally
  const now = yield* Clock.currentTimeMillis
  if ((tally.size() === 0 && tally.pendingRollups() === 0) || now - tally.lastFlushMs < metricsFlushMs) return
  yield* write()
})

/**
 * Every platform queue's backlog now, from its producer binding (through the queues' door): each group queue of a
 * grouped purpose that is bound — up to `QueueGroups.maxGroups`, so a group queue beyond the deployment's
 * `FACTLINE_QUEUE_GROUPS` that still drains is counted too — and each ungrouped queue. Best effort: a binding
 * that cannot say is unknown (null), not a failure of the page. An empty queue has no oldest message (age null).
 */
export const readBacklogs = Effect.fn("Metrics.readBacklogs")(function*(queues: Queues["Service"]) {
  const now = yield* Clock.currentTimeMillis
  const physical = RetryPolicy.all.flatMap((policy) =>
    (policy.grouped ? QueueGroups.queuesOf(policy, QueueGroups.maxGroups) : [policy.queue]).flatMap((name) =>
      queues.bound(name) ? [{ policy, name, group: policy.grouped ? QueueGroups.parse(name)?.group : undefined }] : []))
  const read = yield* Effect.forEach(physical, ({ policy, name, group }) =>
    queues.metrics(name).pipe(
      Effect.map((metrics): readonly [string, Backlog] => {
        const depth = typeof metrics?.backlogCount === "number" ? metrics.backlogCount : null
        const oldest = metrics?.oldestMessageTimestamp === undefined ? NaN : new Date(metrics.oldestMessageTimestamp).getTime()
        const age = depth === 0 || Number.isNaN(oldest) || oldest <= 0 ? null : Math.max(0, now - oldest)
        return [policy.queue, { queue: name, group, depth, ageMs: age }]
      })
    ), { concurrency: "unbounded" })
  const byPurpose = new Map<string, Array<Backlog>>()
  for (const [purpose, backlog] of read) byPurpose.set(purpose, [...(byPurpose.get(purpose) ?? []), backlog])
  return byPurpose as ReadonlyMap<string, ReadonlyArray<Backlog>>
})

/**
 * What the health page reads: the rollup since the window's first minute and pending relays (the platform
 * database, one round trip), open and recent dead letters (one round trip per database that holds tenants).
 */
export const readHealth = Effect.fn("Metrics.readHealth")(function*(since: string) {
  const sql = yield* Sql.PlatformDatabase
  const queues = yield* Queues
  const firstMinute = new Date(Math.floor(Date.parse(since) / 60_000) * 60_000).toISOString()
  const rollupRead = Sql.statement("SELECT * FROM queue_metrics WHERE minute >= ? ORDER BY minute", firstMinute)
  const [rollup, pending] = yield* sql.batch([rollupRead, LedgerTopology.pendingCount])
  const rollupRows = yield* Sql.decodeRows("the platform database", RollupRow, rollupRead, rollup!.rows)
  const [pendingRow] = yield* Sql.decodeRows("the platform database", Sql.Count, LedgerTopology.pendingCount, pending!.rows)
  const openRead = Sql.statement("SELECT queue, COUNT(*) AS n FROM dead_messages WHERE status = 'open' GROUP BY queue")
  const reasonsRead = Sql.statement("SELECT queue, reason, COUNT(*) AS n FROM dead_messages WHERE received_at >= ? GROUP BY queue, reason", since)
  const dead = yield* Placement.everywhere(Effect.flatMap(Effect.service(Sql.ReadDatabase), (read) =>
    Effect.flatMap(read.batch([openRead, reasonsRead]), ([open, reasons]) =>
      Effect.all([
        Sql.decodeRows(`the ${read.role} database`, OpenCount, openRead, open!.rows),
        Sql.decodeRows(`the ${read.role} database`, ReasonCount, reasonsRead, reasons!.rows)
      ]))))
  const openByQueue = new Map<string, number>()
  for (const [open] of dead) for (const r of open) openByQueue.set(r.queue, (openByQueue.get(r.queue) ?? 0) + r.n)
  const byReason = new Map<string, Record<string, number>>()
  for (const [, reasons] of dead) {
    for (const r of reasons) {
      const current = byReason.get(r.queue) ?? {}
      byReason.set(r.queue, { ...current, [r.reason]: (current[r.reason] ?? 0) + r.n })
    }
  }
  const backlogs = yield* readBacklogs(queues)
  return {
    queues: health(
      RetryPolicy.all,
      rollupRows,
      openByQueue,
      byReason,
      backlogs
    ),
    relayPendingShards: pendingRow?.n ?? 0
  }
})

/**
 * Deletes at most `limit` rows per table and database, oldest first: resolved dead letters resolved before
 * `resolvedBefore` (every database holding tenants), rollup minutes before `minuteBefore` (the platform's).
 */
export const prune = Effect.fn("Metrics.prune")(function*(resolvedBefore: string, minuteBefore: string, limit: number) {
  const platform = yield* Sql.PlatformDatabase
  const dead = yield* Placement.everywhere(Effect.flatMap(Effect.service(Sql.ReadDatabase), (sql) => sql.run(
    Sql.typed(sql.orm.delete(deadMessages).where(inArray(deadMessages.id, sql.orm.select({ id: deadMessages.id }).from(deadMessages)
      .where(and(inArray(deadMessages.status, ["replayed", "skipped", "escalated"]), lt(deadMessages.resolvedAt, resolvedBefore)))
      .orderBy(deadMessages.resolvedAt).limit(limit))))
  )))
  // By rowid: the key is (queue, minute), which Drizzle's `inArray` cannot match as a pair.
  const metrics = yield* platform.run(Sql.statement("DELETE FROM queue_metrics WHERE rowid IN (SELECT rowid FROM queue_metrics WHERE minute < ? ORDER BY minute LIMIT ?)", minuteBefore, limit))
  return { deadLetters: dead.reduce((a, b) => a + b, 0), metrics }
})
