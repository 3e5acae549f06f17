/**
 * Health, pure: seed 001's thresholds and how a queue's rollups over a window (MetricsModel) grade into its
 * health, beside its backlog and open dead letters. Metrics reads the rows and re-exports every name this
 * module exports.
 */
import * as Schema from "effect/Schema"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import { batchSizeBounds, durationBoundsMs, histogram, lagBoundsMs } from "./MetricsModel.js"

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

export const OpenCount = Schema.Struct({ queue: Schema.String, n: Schema.Number })
export const ReasonCount = Schema.Struct({ queue: Schema.String, reason: Schema.String, n: Schema.Number })

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
