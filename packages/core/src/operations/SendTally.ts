/**
 * Messages sent to each platform queue, tallied in memory per runtime (one per isolate) and drained into
 * the metrics rollup by `Metrics.record` (the next consumer batch's one round trip) or `Metrics.flushSent`
 * (the HTTP edge, at most once per interval) — so counting a send costs no D1 round trip of its own.
 *
 * `counting` wraps a queue producer binding: every send that resolved is added under the queue's purpose
 * (a group queue `factline-events-3` counts as `factline-events`). Sends to a dead-letter queue are not
 * counted here: dead-lettering is its own metric (`dlq_total`). It does not count sends made outside a
 * runtime that has it (the ledger shard's outbox relay, the fallback when a consumer could not send).
 */
import * as Context from "effect/Context"
import * as QueueGroups from "../consuming/QueueGroups.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"

export interface Shape {
  readonly add: (queue: string, count: number) => void
  /** The counts since the last drain, by queue; the tally is empty after. */
  readonly drain: () => ReadonlyMap<string, number>
  /** Puts counts back (a write of them failed), to go with the next drain. */
  readonly restore: (counts: ReadonlyMap<string, number>) => void
  readonly size: () => number
  /** When the tally was last written to the rollup by the HTTP edge (ms), for `Metrics.flushSent`'s interval. */
  lastFlushMs: number
}

/** The runtime's tally (the composition makes one per runtime, beside the queue bindings it wraps). */
export class SendTally extends Context.Service<SendTally, Shape>()("@factline/core/SendTally") {}

export const make = (): Shape => {
  let counts = new Map<string, number>()
  const add = (queue: string, count: number) => void counts.set(queue, (counts.get(queue) ?? 0) + count)
  return {
    add,
    drain: () => {
      const drained = counts
      counts = new Map()
      return drained
    },
    restore: (back) => back.forEach((n, queue) => add(queue, n)),
    size: () => counts.size,
    lastFlushMs: 0
  }
}

/** The platform queue a send to `queue` counts under, or undefined (a dead-letter queue, an unknown name). */
export const countedAs = (queue: string): string | undefined => {
  const purpose = QueueGroups.purposeOf(queue)
  return RetryPolicy.all.some((p) => p.queue === purpose) ? purpose : undefined
}

/** `queue` with every resolved send added to `tally`. */
export const counting = (queue: Queue, name: string, tally: Shape): Queue => {
  const as = countedAs(name)
  if (as === undefined) return queue
  return {
    metrics: () => queue.metrics(),
    send: async (body, options) => {
      const sent = await queue.send(body, options)
      tally.add(as, 1)
      return sent
    },
    sendBatch: async (messages, options) => {
      const list = [...messages]
      const sent = await queue.sendBatch(list, options)
      tally.add(as, list.length)
      return sent
    }
  }
}
