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
import * as Schema from "effect/Schema"
import * as QueueGroups from "../consuming/QueueGroups.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import type * as Failure from "../failures/Failure.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import { AnalyticsEngine } from "../platform/Bindings.js"
import { Queues } from "../platform/Queues.js"
import * as Sql from "../platform/Sql.js"
import * as Placement from "../placement/Placement.js"
import { deadMessages } from "../tables/PlatformTables.js"
import { countedAs, MetricsTally, type Rollup } from "./MetricsTally.js"

/**
 * Histogram upper bounds in ms (the last is +∞). A quantile reads as its bucket's upper bound, so a check
 * `> threshold` is exact only when the threshold is itself a bound and a finite bound lies above it — else
 * a value past it lands in the open bucket, which reads as the last finite bound (never above it). Both
 * lists keep the bounds they had as a prefix: a row written before a bound was added reads index by index,
 * its old open bucket as the next bucket up — the least the count can mean.
 */
export const lagBoundsMs: ReadonlyArray<number> = [
  100, 500, 1_000, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000, 10_800_000, 43_200_000, Infinity
]
export const durationBoundsMs: ReadonlyArray<number> = [10, 50, 100, 500, 1_000, 5_000, 10_000, 60_000, 120_000, 300_000, 900_000, Infinity]
/** `queue_batch_size` as a distribution: batches counted by size (messages), up to the largest `max_batch_size` (100). */
export const batchSizeBounds: ReadonlyArray<number> = [1, 2, 5, 10, 20, 50, 100, Infinity]

export interface Sample {
  /** The queue's purpose (`factline-events`: every group queue of it records under that name). */
  readonly queue: string
  /** The group queue the batch came from (`factline-events-3` → 3); undefined for an ungrouped queue. */
  readonly group?: number | undefined
  readonly received: number
  readonly acked: number
  readonly retried: number
  readonly deadLettered: number
  /** Dead-lettered messages by failure reason (each message once, under its first record's reason). */
  readonly deadLetteredByReason?: Readonly<Record<string, number>>
  readonly durationMs: number
  readonly lagsMs: ReadonlyArray<number>
  /**
   * Messages accepted onto the queue and not yet consumed, as the queue counted them when it delivered the
   * batch (`batch.metadata.metrics.backlogCount`); null when the platform did not say.
   */
  readonly depth?: number | null
}

export const histogram = (values: ReadonlyArray<number>, bounds: ReadonlyArray<number>): Array<number> => {
  const counts = bounds.map(() => 0)
  for (const v of values) counts[bounds.findIndex((b) => v <= b)]! += 1
  return counts
}

const minuteOf = (at: Date) => new Date(Math.floor(at.getTime() / 60_000) * 60_000).toISOString()

/** A batch's sample as its minute's rollup (`at`: when it was recorded). */
export const rollupOf = (sample: Sample, at: Date): Rollup => ({
  queue: sample.queue,
  minute: minuteOf(at),
  batches: 1,
  received: sample.received,
  acked: sample.acked,
  retried: sample.retried,
  deadLettered: sample.deadLettered,
  deadLetteredByReason: sample.deadLetteredByReason ?? {},
  durationMsSum: Math.round(sample.durationMs),
  durationMsMax: Math.round(sample.durationMs),
  batchSizeMax: sample.received,
  batchSizeHistogram: histogram([sample.received], batchSizeBounds),
  depthMax: sample.depth ?? null,
  depthByGroup: sample.group === undefined || sample.depth === undefined || sample.depth === null ? {} : { [String(sample.group)]: sample.depth },
  lagHistogram: histogram(sample.lagsMs, lagBoundsMs),
  durationHistogram: histogram([sample.durationMs], durationBoundsMs)
})

/** The one statement that adds a rollup (one batch's, or several merged) to its minute's row. */
export const upsert = (rollup: Rollup): { readonly sql: string; readonly params: ReadonlyArray<string | number | null> } => {
  const merge = (column: string) =>
    `(SELECT json_group_array(COALESCE(json_extract(queue_metrics.${column}, '$[' || key || ']'), 0) + value) FROM json_each(excluded.${column}))`
  // Counts by reason, added key by key (a reason new to the minute starts at the batch's count).
  const mergeCounts = (column: string, combine: "SUM" | "MAX" = "SUM") =>
    `(SELECT json_group_object(key, total) FROM (SELECT key, ${combine}(value) AS total FROM (SELECT key, value FROM json_each(queue_metrics.${column}) UNION ALL SELECT key, value FROM json_each(excluded.${column})) GROUP BY key))`
  return {
    sql: `INSERT INTO queue_metrics (queue, minute, batches, received, acked, retried, dead_lettered, dead_lettered_by_reason, duration_ms_sum, duration_ms_max, batch_size_max, depth_max, lag_histogram, duration_histogram, batch_size_histogram, depth_by_group)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
          ON CONFLICT (queue, minute) DO UPDATE SET
            batches = queue_metrics.batches + excluded.batches, received = queue_metrics.received + excluded.received, acked = queue_metrics.acked + excluded.acked,
            retried = queue_metrics.retried + excluded.retried, dead_lettered = queue_metrics.dead_lettered + excluded.dead_lettered,
            dead_lettered_by_reason = ${mergeCounts("dead_lettered_by_reason")},
            duration_ms_sum = queue_metrics.duration_ms_sum + excluded.duration_ms_sum, duration_ms_max = MAX(queue_metrics.duration_ms_max, excluded.duration_ms_max),
            batch_size_max = MAX(queue_metrics.batch_size_max, excluded.batch_size_max),
            depth_max = MAX(COALESCE(queue_metrics.depth_max, excluded.depth_max), COALESCE(excluded.depth_max, queue_metrics.depth_max)),
            lag_histogram = ${merge("lag_histogram")}, duration_histogram = ${merge("duration_histogram")},
            batch_size_histogram = ${merge("batch_size_histogram")}, depth_by_group = ${mergeCounts("depth_by_group", "MAX")}`,
    params: [
      rollup.queue, rollup.minute, rollup.batches, rollup.received, rollup.acked, rollup.retried, rollup.deadLettered, JSON.stringify(rollup.deadLetteredByReason),
      rollup.durationMsSum, rollup.durationMsMax, rollup.batchSizeMax, rollup.depthMax,
      JSON.stringify(rollup.lagHistogram), JSON.stringify(rollup.durationHistogram), JSON.stringify(rollup.batchSizeHistogram), JSON.stringify(rollup.depthByGroup)
    ]
  }
}

/** The statement that adds `count` messages sent to `queue` to its minute's row. */
export const sentUpsert = (queue: string, count: number, at: Date): { readonly sql: string; readonly params: ReadonlyArray<string | number> } => ({
  sql: `INSERT INTO queue_metrics (queue, minute, sent) VALUES (?, ?, ?)
        ON CONFLICT (queue, minute) DO UPDATE SET sent = queue_metrics.sent + excluded.sent`,
  params: [queue, minuteOf(at), count]
})

/** The Analytics Engine data point of a sample: blobs [queue], doubles in `dataPointDoubles`' order. */
export const dataPoint = (sample: Sample, sent: number = 0) => ({
  indexes: [sample.queue],
  blobs: [sample.queue],
  doubles: [sample.received, sample.acked, sample.retried, sample.deadLettered, sample.durationMs, sample.received,
    sample.lagsMs.length > 0 ? Math.max(...sample.lagsMs) : 0, sent, sample.depth ?? -1]
})
/** The data point of messages sent to a queue outside a batch of its own (every other double 0, depth −1: unknown). */
export const sentDataPoint = (queue: string, sent: number) =>
  dataPoint({ queue, received: 0, acked: 0, retried: 0, deadLettered: 0, durationMs: 0, lagsMs: [] }, sent)
/**
 * Column names of `dataPoint`'s doubles, for querying Analytics Engine (`double1` … `double9`). `queue_dlq_total`
 * there is the total; by reason it is the rollup's `dead_lettered_by_reason` (a data point has one index).
 */
export const dataPointDoubles = [
  "queue_messages_received_total", "queue_messages_acked_total", "queue_messages_retried_total", "queue_dlq_total",
  "queue_processing_duration_ms", "queue_batch_size", "queue_lag_max_ms", "queue_messages_sent_total", "queue_depth"
] as const

export type Level = "ok" | "warning" | "critical"

/**
 * Seed 001's thresholds: warning / critical; and seed 002's "backlog nearing the retention window": the age
 * of the oldest message still on the queue as a share of that queue's configured retention
 * (`RetryPolicy.messageRetentionSeconds`, what `factline deploy` creates it with: 4 days) — half of it a
 * warning, three quarters critical (a message older than the retention is deleted unconsumed).
 */
export const thresholds = {
  dlq_open: { warning: 0, critical: 100 },
  depth: { warning: 10_000, critical: 100_000 },
  processing_p99_ms: { warning: 10_000, critical: 60_000 },
  retry_rate: { warning: 0.05, critical: 0.2 },
  backlog_age_of_retention: { warning: 0.5, critical: 0.75 }
} as const

/** The backlog-age thresholds of a queue retaining messages `retentionSeconds` (ms). */
export const backlogAgeThresholds = (retentionSeconds: number) => ({
  warning: thresholds.backlog_age_of_retention.warning * retentionSeconds * 1_000,
  critical: thresholds.backlog_age_of_retention.critical * retentionSeconds * 1_000
})

const grade = (value: number | null, t: { readonly warning: number; readonly critical: number }): Level =>
  value === null ? "ok" : value > t.critical ? "critical" : value > t.warning ? "warning" : "ok"

const worst = (levels: ReadonlyArray<Level>): Level => (levels.includes("critical") ? "critical" : levels.includes("warning") ? "warning" : "ok")

/**
 * The platform's one level (`GET /v1/queues/health`'s `status`, what the health alert announces): the worst
 * queue's, and at least warning while a shard's relay is pending.
 */
export const overall = (queues: ReadonlyArray<Pick<QueueHealth, "status">>, relayPendingShards: number): Level => {
  const level = worst(queues.map((q) => q.status))
  return level === "ok" && relayPendingShards > 0 ? "warning" : level
}

/** The p-quantile of a histogram, as its bucket's upper bound (null when empty; the open bucket reports the last finite bound). */
export const quantile = (counts: ReadonlyArray<number>, bounds: ReadonlyArray<number>, p: number): number | null => {
  const total = counts.reduce((a, b) => a + b, 0)
  if (total === 0) return null
  let seen = 0
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i]!
    if (seen >= p * total) return Number.isFinite(bounds[i]!) ? bounds[i]! : bounds[bounds.length - 2]!
  }
  return null
}

/**
 * A minute's row of `queue_metrics`. `dead_lettered_by_reason`: JSON object, reason → count (`{}` in rows written
 * before it was recorded); `batch_size_histogram`: JSON array of batch counts by `batchSizeBounds` (`[]` before);
 * `depth_by_group`: JSON object, group → the deepest backlog a batch of that group queue reported in the minute.
 */
export const RollupRow = Schema.Struct({
  queue: Schema.String,
  batches: Schema.Number,
  received: Schema.Number,
  acked: Schema.Number,
  retried: Schema.Number,
  dead_lettered: Schema.Number,
  dead_lettered_by_reason: Schema.optional(Schema.String),
  sent: Schema.optional(Schema.Number),
  depth_max: Schema.optional(Schema.NullOr(Schema.Number)),
  duration_ms_sum: Schema.Number,
  duration_ms_max: Schema.Number,
  batch_size_max: Schema.Number,
  batch_size_histogram: Schema.optional(Schema.String),
  depth_by_group: Schema.optional(Schema.String),
  lag_histogram: Schema.String,
  duration_histogram: Schema.String,
  minute: Schema.String
})
export type RollupRow = typeof RollupRow.Type

const OpenCount = Schema.Struct({ queue: Schema.String, n: Schema.Number })
const ReasonCount = Schema.Struct({ queue: Schema.String, reason: Schema.String, n: Schema.Number })

export type QueueHealth = {
  readonly queue: string
  readonly status: Level
  readonly received: number
  readonly acked: number
  readonly retried: number
  readonly dead_lettered: number
  /** `dlq_total{queue, reason}`: messages dead-lettered in the window, by failure reason. */
  readonly dead_lettered_by_reason: Readonly<Record<string, number>>
  /** `messages_sent_total{queue}` in the window. */
  readonly sent: number
  readonly retry_rate: number
  readonly dlq_open: number
  readonly dlq_by_reason: Readonly<Record<string, number>>
  /** The backlog: for a grouped purpose the SUM over its group queues (each the queue's own count now, else the last a batch reported). */
  readonly depth: number | null
  /** How long the oldest message still on the queue has waited (the OLDEST across a purpose's group queues); null when none said. */
  readonly backlog_age_ms: number | null
  /** The queue's message retention, which `backlog_age_ms` is graded against. */
  readonly retention_seconds: number
  /** A grouped purpose's group queues, each with its own backlog (absent for an ungrouped queue). */
  readonly groups?: ReadonlyArray<GroupBacklog>
  /** `messages_sent_total{queue=<its DLQ>}`: messages the consumers dead-lettered to its DLQ in the window. */
  readonly dead_letter_sent: number
  /** `queue_batch_size`: batches by size in the window (non-cumulative; keys are upper bounds, `+Inf` the open bucket), and its quantiles. */
  readonly batch_size_buckets: Readonly<Record<string, number>>
  readonly batch_size_p50: number | null
  readonly batch_size_p99: number | null
  readonly batch_size_max: number
  readonly lag_p50_ms: number | null
  readonly lag_p99_ms: number | null
  readonly processing_p99_ms: number | null
  readonly batches: number
  readonly checks: Readonly<Record<"dlq_open" | "depth" | "processing_p99_ms" | "retry_rate" | "backlog_age_ms", Level>>
  /** Per minute, oldest first: sent, received, lag p99 and the deepest backlog batches saw (summed over group queues; null: none recorded), for charts. */
  readonly series: ReadonlyArray<{ readonly minute: string; readonly sent: number; readonly received: number; readonly lag_p99_ms: number | null; readonly depth: number | null }>
}

const sum = (a: Array<number>, b: ReadonlyArray<number>) => b.forEach((v, i) => (a[i] = (a[i] ?? 0) + v))

/** One group queue's backlog (or an ungrouped queue's, `group` undefined). */
export interface GroupBacklog {
  readonly queue: string
  readonly group: number
  readonly depth: number | null
  readonly backlog_age_ms: number | null
}

/** What a queue's producer binding said of its backlog now (`Queue.metrics()`), per physical queue. */
export interface Backlog {
  /** The physical queue (`factline-events-3`). */
  readonly queue: string
  /** Its group; undefined for an ungrouped queue. */
  readonly group: number | undefined
  readonly depth: number | null
  readonly ageMs: number | null
}

const parseJson = <A>(text: string | undefined, empty: A): A => (text === undefined || text === "" ? empty : JSON.parse(text) as A)

/** Non-cumulative bucket counts keyed by upper bound (`+Inf`: the open bucket). */
const buckets = (counts: ReadonlyArray<number>, bounds: ReadonlyArray<number>): Record<string, number> =>
  Object.fromEntries(bounds.map((b, i) => [Number.isFinite(b) ? String(b) : "+Inf", counts[i] ?? 0]))

/**
 * A grouped purpose's backlog per group: each group queue's own figure now (`live`), else the last one a batch
 * of that group reported in the window; depth summed, age the oldest. An ungrouped queue is its one queue.
 */
const backlogOf = (policy: RetryPolicy.RetryPolicy, mine: ReadonlyArray<RollupRow>, live: ReadonlyArray<Backlog>) => {
  const lastRecorded = mine.findLast((r) => r.depth_max !== undefined && r.depth_max !== null)?.depth_max ?? null
  if (!policy.grouped) {
    const now = live.find((b) => b.group === undefined)
    return { depth: now?.depth ?? lastRecorded, age: now?.ageMs ?? null, groups: undefined }
  }
  const recorded = new Map<number, number>()
  for (const r of mine) for (const [g, n] of Object.entries(parseJson<Record<string, number>>(r.depth_by_group, {}))) recorded.set(Number(g), n)
  const numbers = new Set<number>([...live.flatMap((b) => b.group === undefined ? [] : [b.group]), ...recorded.keys()])
  const groups: Array<GroupBacklog> = [...numbers].sort((a, b) => a - b).map((group) => {
    const now = live.find((b) => b.group === group)
    return { queue: `${policy.queue}-${group}`, group, depth: now?.depth ?? recorded.get(group) ?? null, backlog_age_ms: now?.ageMs ?? null }
  })
  const depths = groups.flatMap((g) => g.depth === null ? [] : [g.depth])
  const ages = groups.flatMap((g) => g.backlog_age_ms === null ? [] : [g.backlog_age_ms])
  // Rows written before depths were kept per group have only the deepest batch's figure: the best there is.
  return { depth: depths.length > 0 ? depths.reduce((a, b) => a + b, 0) : lastRecorded, age: ages.length > 0 ? Math.max(...ages) : null, groups }
}

export const health = (
  policies: ReadonlyArray<RetryPolicy.RetryPolicy>,
  rows: ReadonlyArray<RollupRow>,
  dlqOpen: ReadonlyMap<string, number>,
  dlqByReason: ReadonlyMap<string, Record<string, number>>,
  backlogs: ReadonlyMap<string, ReadonlyArray<Backlog>> = new Map()
): ReadonlyArray<QueueHealth> =>
  policies.map((policy) => {
    const { queue } = policy
    const mine = rows.filter((r) => r.queue === queue).sort((a, b) => a.minute.localeCompare(b.minute))
    const total = (f: keyof Pick<RollupRow, "received" | "acked" | "retried" | "dead_lettered" | "batches">) => mine.reduce((n, r) => n + r[f], 0)
    const lag: Array<number> = []
    const duration: Array<number> = []
    const batchSizes: Array<number> = []
    for (const r of mine) {
      sum(lag, JSON.parse(r.lag_histogram) as Array<number>)
      sum(duration, JSON.parse(r.duration_histogram) as Array<number>)
      sum(batchSizes, parseJson<Array<number>>(r.batch_size_histogram, []))
    }
    const byReason: Record<string, number> = {}
    for (const r of mine) {
      for (const [reason, n] of Object.entries(JSON.parse(r.dead_lettered_by_reason ?? "{}") as Record<string, number>)) byReason[reason] = (byReason[reason] ?? 0) + n
    }
    const received = total("received")
    const retried = total("retried")
    const retryRate = received === 0 ? 0 : retried / received
    const processingP99 = quantile(duration, durationBoundsMs, 0.99)
    const backlog = backlogOf(policy, mine, backlogs.get(queue) ?? [])
    const open = dlqOpen.get(queue) ?? 0
    const checks = {
      dlq_open: grade(open, thresholds.dlq_open),
      depth: grade(backlog.depth, thresholds.depth),
      processing_p99_ms: grade(processingP99, thresholds.processing_p99_ms),
      retry_rate: grade(retryRate, thresholds.retry_rate),
      backlog_age_ms: grade(backlog.age, backlogAgeThresholds(policy.messageRetentionSeconds))
    }
    return {
      queue,
      status: worst(Object.values(checks)),
      received,
      acked: total("acked"),
      retried,
      dead_lettered: total("dead_lettered"),
      dead_lettered_by_reason: byReason,
      sent: mine.reduce((n, r) => n + (r.sent ?? 0), 0),
      dead_letter_sent: rows.reduce((n, r) => n + (r.queue === policy.deadLetterQueue ? r.sent ?? 0 : 0), 0),
      retry_rate: Math.round(retryRate * 10_000) / 10_000,
      dlq_open: open,
      dlq_by_reason: dlqByReason.get(queue) ?? {},
      depth: backlog.depth,
      backlog_age_ms: backlog.age,
      retention_seconds: policy.messageRetentionSeconds,
      ...(backlog.groups === undefined ? {} : { groups: backlog.groups }),
      lag_p50_ms: quantile(lag, lagBoundsMs, 0.5),
      lag_p99_ms: quantile(lag, lagBoundsMs, 0.99),
      processing_p99_ms: processingP99,
      batch_size_buckets: buckets(batchSizes, batchSizeBounds),
      batch_size_p50: quantile(batchSizes, batchSizeBounds, 0.5),
      batch_size_p99: quantile(batchSizes, batchSizeBounds, 0.99),
      batch_size_max: mine.reduce((n, r) => Math.max(n, r.batch_size_max), 0),
      batches: total("batches"),
      checks,
      series: mine.map((r) => {
        const byGroup = Object.values(parseJson<Record<string, number>>(r.depth_by_group, {}))
        return {
          minute: r.minute,
          sent: r.sent ?? 0,
          received: r.received,
          lag_p99_ms: quantile(JSON.parse(r.lag_histogram) as Array<number>, lagBoundsMs, 0.99),
          depth: byGroup.length > 0 ? byGroup.reduce((a, b) => a + b, 0) : r.depth_max ?? null
        }
      })
    }
  })

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
