/**
 * Delayed sends, at both ends of the events queue (seed 003, "Delayed Messages and Backoff").
 *
 * A producer asks for `delay_seconds` (0 to 43,200: Cloudflare Queues' 12 hours); it is turned once, when the
 * event is accepted, into the envelope's `deliver_after` — `created_at + delay_seconds`, but never later than
 * `now + delay_seconds` (a client's clock ahead of ours cannot stretch it). `created_at` is fixed by whoever
 * sends first and kept by every retry of the same body (the typed client resends it identically), so a
 * client's resend under the same idempotency key computes the same `deliver_after` — or an earlier one, never
 * a later one. The message is then sent with the queue's own `delaySeconds` for what is left.
 *
 * Every later copy of the envelope carries `deliver_after` as it is (a consumer retry, a redelivery, a
 * dead-letter replay, a recover re-send); the events consumer parks a copy that arrives before it (`NotDue`:
 * sent again with the remaining delay, then acked — no attempt spent, never dead-lettered), so nothing restarts
 * the delay and nothing runs early. It does not schedule anything longer than the queue can hold: longer waits
 * are a timer's (definitions/Timer.ts).
 */
import { Issues, maxDelaySeconds } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"

export { maxDelaySeconds }

/** A staggered batch: event `i` waits `floor(i / every) * seconds` more (seed 003: `index * 60`, or N per second). */
export interface Stagger {
  readonly seconds: number
  /** How many events share each step (default 1). */
  readonly every?: number
}

/** The extra delay of the `index`-th event of a staggered batch. */
export const staggerOf = (stagger: Stagger, index: number): number =>
  Math.floor(index / Math.max(1, Math.floor(stagger.every ?? 1))) * stagger.seconds

const parse = (iso: string | undefined): number | undefined => {
  if (iso === undefined) return undefined
  const ms = Date.parse(iso)
  return Number.isNaN(ms) ? undefined : ms
}

/**
 * The `deliver_after` of an input (undefined: due at once), or the problem with it. `path` is where the
 * input's fields are (`events.3`).
 */
export const deliverAfterOf = (
  input: { readonly created_at?: string | undefined; readonly delay_seconds?: number | undefined; readonly deliver_after?: string | undefined },
  nowMs: number,
  path: string
): { readonly deliver_after?: string; readonly problem?: Issues.Problem } => {
  const at = (field: string) => (path === "" ? field : `${path}.${field}`)
  if (input.deliver_after !== undefined) {
    const ms = parse(input.deliver_after)
    if (ms === undefined) return { problem: { path: at("deliver_after"), message: "must be an ISO-8601 date-time, e.g. 2026-11-22T10:00:00Z" } }
    if (ms > nowMs + maxDelaySeconds * 1_000) {
      return { problem: { path: at("deliver_after"), message: `must be at most ${maxDelaySeconds} seconds (12 hours) from now; for a later time, use a timer` } }
    }
    return { deliver_after: new Date(ms).toISOString() }
  }
  const delay = input.delay_seconds ?? 0
  if (delay <= 0) return {}
  if (!Number.isInteger(delay) || delay > maxDelaySeconds) {
    return { problem: { path: at("delay_seconds"), message: `must be a whole number of seconds from 0 to ${maxDelaySeconds} (12 hours)` } }
  }
  const from = Math.min(parse(input.created_at) ?? nowMs, nowMs)
  return { deliver_after: new Date(from + delay * 1_000).toISOString() }
}

/** Whole seconds from now to `deliverAfter` (0 when it has passed or is absent), at most the queue's 12 hours. */
export const secondsUntil = (deliverAfter: string | undefined, nowMs: number): number => {
  const ms = parse(deliverAfter)
  if (ms === undefined || ms <= nowMs) return 0
  return Math.min(maxDelaySeconds, Math.ceil((ms - nowMs) / 1_000))
}

/**
 * A message that arrived before its `deliver_after` (a replay, a recover re-send, a redelivery): retryable and
 * parked — the consumer sends it again with the remaining delay and acks this copy, spending none of its attempts.
 */
export const notDue = (deliverAfter: string, seconds: number): Failure.Unavailable =>
  new Failure.Unavailable({
    service: "the message's deliver_after",
    message: `not due before ${deliverAfter}: sent again to arrive in ${seconds} s`,
    parkSeconds: seconds
  })
