/**
 * What an isolate has counted for the metrics rollup and not yet written, per runtime (one per isolate):
 * messages sent to each platform queue, and consumer batches' rollups (`Rollup`: a queue's minute, several
 * batches merged in memory). `Metrics.record` writes them in one round trip when a batch needs it at once (a
 * retry or a dead letter, the first batch of an isolate, `FACTLINE_METRICS_FLUSH_SECONDS=0`) or when the last
 * write is older than the interval; `Metrics.flushPending` does the same after an HTTP response and on the
 * cron. So a clean batch costs no D1 round trip of its own, and a send none at all.
 *
 * `countSent` is what the queues' door (platform/Queues) counts with: every send that resolved is added under
 * the queue's purpose (a group queue `factline-events-3` counts as `factline-events`); a send to a dead-letter
 * queue (a consumer dead-lettering a message) under the DLQ's own name (`factline-events-dlq`), beside
 * `dlq_total`. The ledger shard's outbox relay runs on the shard's runtime, whose door counts into a tally of its
 * own; the shard writes it after each relay (`Metrics.recordSent`).
 */
import * as Context from "effect/Context"
import * as QueueGroups from "../consuming/QueueGroups.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"

/** A queue's counts for one minute, as the rollup adds them to its row: one batch's, or several merged. */
export interface Rollup {
  readonly queue: string
  /** ISO-8601 start of the minute. */
  readonly minute: string
  readonly batches: number
  readonly received: number
  readonly acked: number
  readonly retried: number
  readonly deadLettered: number
  readonly deadLetteredByReason: Readonly<Record<string, number>>
  readonly durationMsSum: number
  readonly durationMsMax: number
  readonly batchSizeMax: number
  /** Batches by size (`Metrics.batchSizeBounds`). */
  readonly batchSizeHistogram: ReadonlyArray<number>
  readonly depthMax: number | null
  /** The deepest backlog per group queue of a grouped purpose (`{"3": 1200}`); `{}` for an ungrouped queue. */
  readonly depthByGroup: Readonly<Record<string, number>>
  readonly lagHistogram: ReadonlyArray<number>
  readonly durationHistogram: ReadonlyArray<number>
}

const addCounts = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => Array.from({ length: Math.max(a.length, b.length) }, (_, i) => (a[i] ?? 0) + (b[i] ?? 0))
const maxByKey = (a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>) => {
  const out: Record<string, number> = { ...a }
  for (const [key, n] of Object.entries(b)) out[key] = Math.max(out[key] ?? n, n)
  return out
}

/** Two rollups of one queue and minute as one: what the rollup's upsert does in SQL, done in memory. */
export const merge = (a: Rollup, b: Rollup): Rollup => {
  const byReason: Record<string, number> = { ...a.deadLetteredByReason }
  for (const [reason, n] of Object.entries(b.deadLetteredByReason)) byReason[reason] = (byReason[reason] ?? 0) + n
  return {
    queue: a.queue,
    minute: a.minute,
    batches: a.batches + b.batches,
    received: a.received + b.received,
    acked: a.acked + b.acked,
    retried: a.retried + b.retried,
    deadLettered: a.deadLettered + b.deadLettered,
    deadLetteredByReason: byReason,
    durationMsSum: a.durationMsSum + b.durationMsSum,
    durationMsMax: Math.max(a.durationMsMax, b.durationMsMax),
    batchSizeMax: Math.max(a.batchSizeMax, b.batchSizeMax),
    batchSizeHistogram: addCounts(a.batchSizeHistogram, b.batchSizeHistogram),
    depthMax: a.depthMax === null ? b.depthMax : b.depthMax === null ? a.depthMax : Math.max(a.depthMax, b.depthMax),
    depthByGroup: maxByKey(a.depthByGroup, b.depthByGroup),
    lagHistogram: addCounts(a.lagHistogram, b.lagHistogram),
    durationHistogram: addCounts(a.durationHistogram, b.durationHistogram)
  }
}

export interface Shape {
  readonly add: (queue: string, count: number) => void
  /** The send counts since the last drain, by queue; the tally of sends is empty after. */
  readonly drain: () => ReadonlyMap<string, number>
  /** Puts send counts back (a write of them failed), to go with the next drain. */
  readonly restore: (counts: ReadonlyMap<string, number>) => void
  /** Queues with sends waiting. */
  readonly size: () => number
  /** Adds a batch's rollup to its queue's minute. */
  readonly addRollup: (rollup: Rollup) => void
  /** The rollups waiting, one per queue and minute; none wait after. */
  readonly drainRollups: () => ReadonlyArray<Rollup>
  /** Puts rollups back (a write of them failed). */
  readonly restoreRollups: (rollups: ReadonlyArray<Rollup>) => void
  /** Rollups waiting. */
  readonly pendingRollups: () => number
  /** When the tally was last written (ms), for the flush interval. */
  lastFlushMs: number
}

/** The runtime's tally (the composition makes one per runtime, beside the queue bindings it wraps). */
export class MetricsTally extends Context.Service<MetricsTally, Shape>()("@factline/core/MetricsTally") {}

export const make = (): Shape => {
  let counts = new Map<string, number>()
  let rollups = new Map<string, Rollup>()
  const add = (queue: string, count: number) => void counts.set(queue, (counts.get(queue) ?? 0) + count)
  const addRollup = (rollup: Rollup) => {
    const key = `${rollup.queue}\u0000${rollup.minute}`
    const waiting = rollups.get(key)
    rollups.set(key, waiting === undefined ? rollup : merge(waiting, rollup))
  }
  return {
    add,
    drain: () => {
      const drained = counts
      counts = new Map()
      return drained
    },
    restore: (back) => back.forEach((n, queue) => add(queue, n)),
    size: () => counts.size,
    addRollup,
    drainRollups: () => {
      const drained = [...rollups.values()]
      rollups = new Map()
      return drained
    },
    restoreRollups: (back) => back.forEach(addRollup),
    pendingRollups: () => rollups.size,
    lastFlushMs: 0
  }
}

/** The platform queue a send to `queue` counts under (a DLQ under its own name), or undefined (an unknown name). */
export const countedAs = (queue: string): string | undefined => {
  const purpose = QueueGroups.purposeOf(queue)
  return RetryPolicy.all.some((p) => p.queue === purpose || p.deadLetterQueue === purpose) ? purpose : undefined
}

/** The queues' door's `count` (Queues.Options) for `tally`: each resolved send added under the queue it counts as. */
export const countSent = (tally: Shape) => (queue: string, messages: number): void => {
  const as = countedAs(queue)
  if (as !== undefined) tally.add(as, messages)
}
