/**
 * The metrics model, pure: a batch's sample and its histograms, and the minute rollup it becomes (its upsert and
 * its Analytics Engine data point). Metrics records them and re-exports every name this module exports.
 */
import { and } from "drizzle-orm"
import { type Rollup } from "./MetricsTally.js"

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
