/**
 * What the consumer does with one message of a batch, decided from its items' outcomes: ack it, retry it (after
 * which delay), park it, hand it back unstarted, or dead-letter it (with which records). Pure: `Consumer.run`
 * gathers the outcomes and carries the verdicts out (dead-letter and park sends, the runs view, ack/retry).
 * The rules are the ones `Consumer`'s header states.
 */
import type { FailureReason } from "@factline/schemas"
import type * as Failure from "../failures/Failure.js"
import { maxErrorLength } from "./DeadLetters.js"
import * as Deadline from "./Deadline.js"
import * as RetryPolicy from "./RetryPolicy.js"
import type * as Runs from "./Runs.js"

/** One record to dead-letter for a message: the whole body, or one item's isolated message. */
export interface DeadRecord {
  readonly body: unknown
  readonly reason: FailureReason
  readonly error: string
  /** A defect's stack, kept in the record beside its error. */
  readonly stack?: string | undefined
  /** The inbox's first sight of the key (queues that keep one); otherwise settled when the record is sent. */
  readonly firstAttemptedAt?: string
}

export type Verdict =
  | { readonly _tag: "Ack" }
  | { readonly _tag: "Retry"; readonly error: string; readonly atLeastSeconds?: number; readonly budget?: Failure.Budget; readonly errorClass?: string }
  | { readonly _tag: "Park"; readonly error: string; readonly seconds: number }
  /** Not started (the time budget was spent): retried at once, or parked on its last allowed attempt. */
  | { readonly _tag: "HandBack"; readonly error: string }
  | { readonly _tag: "DeadLetter"; readonly records: ReadonlyArray<DeadRecord> }

export const ack: Verdict = { _tag: "Ack" }

export const truncate = (s: string) => (s.length > maxErrorLength ? `${s.slice(0, maxErrorLength)}…` : s)

/**
 * A failure outside the message's own processing (loading, the inbox): retried, but on the last allowed attempt
 * dead-lettered here with its error — left to the platform, it would reach the DLQ without any failure context.
 */
export const retryOrExhausted = (policy: RetryPolicy.RetryPolicy, m: Message, error: string): Verdict =>
  RetryPolicy.isLastAttempt(policy, m.attempts)
    ? { _tag: "DeadLetter", records: [{ body: m.body, reason: "retries_exhausted", error }] }
    : { _tag: "Retry", error }

/** A message whose body did not decode: retried (or exhausted) when the failure is retryable, else dead-lettered at once. */
export const undecoded = (policy: RetryPolicy.RetryPolicy, m: Message, failure: Failure.Failure): Verdict =>
  failure.retryable
    ? retryOrExhausted(policy, m, failure.message)
    : { _tag: "DeadLetter", records: [{ body: m.body, reason: failure.reason, error: failure.message }] }

/** One failed item of a message. */
export interface ItemFailure<I> {
  readonly item: I
  readonly failure: Failure.Failure
}

/**
 * The verdict on a processed message from its items' failures (none: acked). `firstSeenAt` is the inbox's first
 * sight of the first failing key; `isolate` builds the message to dead-letter for one item of several.
 */
export const ofFailures = <I extends { readonly key: string }>(
  policy: RetryPolicy.RetryPolicy,
  m: Message,
  items: ReadonlyArray<I>,
  failures: ReadonlyArray<ItemFailure<I>>,
  firstSeenAt: string | undefined,
  isolate: ((item: I) => unknown) | undefined
): Verdict => {
  if (failures.length === 0) return ack
  // Every failure only waits for a hold to end: parked, whatever the attempt.
  if (failures.every((f) => f.failure.retryable && f.failure.parkSeconds !== undefined)) {
    return { _tag: "Park", error: failures[0]!.failure.message, seconds: Math.max(...failures.map((f) => f.failure.parkSeconds!)) }
  }
  // Its only retryable failures are work handed back unstarted: handed back (a permanent sibling is
  // dead-lettered on the delivery that settles the message, as beside any retry).
  const retryable = failures.filter((f) => f.failure.retryable)
  if (retryable.length > 0 && retryable.every((f) => Deadline.isHandedBack(f.failure))) {
    return { _tag: "HandBack", error: retryable[0]!.failure.message }
  }
  const last = RetryPolicy.isLastAttempt(policy, m.attempts)
  // A failure with a budget of its own (a defect's) is settled like a permanent one once that budget is spent.
  const spent = (f: Failure.Failure) => f.budget !== undefined && m.attempts >= f.budget.maxAttempts
  const retrying = failures.find((f) => f.failure.retryable && !spent(f.failure))
  // A retryable failure retries the whole message; its permanent siblings are dead-lettered when it settles.
  if (retrying && !last) {
    const atLeast = Math.max(0, ...failures.map((f) => f.failure.retryAfterSeconds ?? 0))
    // Only budgeted failures to retry (defects): their short delays, not the queue's.
    const budget = failures.every((f) => !f.failure.retryable || f.failure.budget !== undefined) ? retrying.failure.budget : undefined
    return {
      _tag: "Retry",
      error: retrying.failure.message,
      ...(atLeast > 0 ? { atLeastSeconds: atLeast } : {}),
      ...(budget === undefined ? {} : { budget, errorClass: retrying.failure.reason })
    }
  }
  const alone = items.length === 1 || isolate === undefined
  return {
    _tag: "DeadLetter",
    records: (alone ? failures.slice(0, 1) : failures).map(({ item, failure }) => {
      const stack = (alone ? failures.find((f) => f.failure.defectStack !== undefined)?.failure : failure)?.defectStack
      return {
        body: alone ? m.body : isolate!(item),
        reason: failure.retryable && failure.budget === undefined ? "retries_exhausted" : failure.reason,
        error: alone && failures.length > 1 ? failures.map((f) => `${f.item.key}: ${f.failure.message}`).join("; ") : failure.message,
        ...(stack === undefined ? {} : { stack }),
        ...(firstSeenAt === undefined ? {} : { firstAttemptedAt: firstSeenAt })
      }
    })
  }
}

/**
 * A retry's delay in seconds (0 for any other verdict): the policy's jittered backoff, scaled — a budgeted failure
 * (a defect) on its own short delays — and never less than a receiver's Retry-After, up to the policy's maximum.
 */
export const retryDelay = (policy: RetryPolicy.RetryPolicy, scale: number, v: Verdict, m: Message): number => {
  if (v._tag !== "Retry") return 0
  const own = v.budget === undefined ? policy : { ...policy, initialDelaySeconds: v.budget.initialDelaySeconds, maxDelaySeconds: v.budget.maxDelaySeconds }
  const policyDelay = Math.ceil(RetryPolicy.delay(own, m.attempts, RetryPolicy.jitterOf(m.id, m.attempts)) * scale)
  // A receiver's Retry-After is honoured as given (never scaled), up to the policy's maximum delay.
  const atLeast = Math.min(v.atLeastSeconds ?? 0, policy.maxDelaySeconds)
  return Math.max(policyDelay, Math.ceil(atLeast))
}

/**
 * The runs view's attempt for a settled message (Runs): `delaySeconds` is its retry's delay, `lastAttempt` whether a
 * hand-back is parked rather than retried, `at` the time so many seconds after the batch's start.
 */
export const runsAttempt = (v: Verdict, m: Message, delaySeconds: number, lastAttempt: boolean, at: (seconds: number) => string): Runs.Attempt => {
  const common = { messageId: m.id, attempt: m.attempts, body: m.body }
  switch (v._tag) {
    case "Ack": return { ...common, outcome: "ok" }
    case "Retry": return { ...common, outcome: "retry", error: v.error, nextRetryAt: at(delaySeconds) }
    case "Park": return { ...common, outcome: "park", error: v.error, nextRetryAt: at(v.seconds) }
    case "HandBack": return { ...common, outcome: lastAttempt ? "park" : "retry", error: v.error, nextRetryAt: at(0) }
    case "DeadLetter": return { ...common, outcome: "dead", error: v.records[0]?.error ?? "dead-lettered" }
  }
}
