/**
 * Carrying out a batch's verdicts (Verdict), in the order that keeps every outcome durable before its message is
 * acked: dead letters sent, parked messages sent again, the runs view and first attempts recorded, then each
 * message acked or retried on its own. `Consumer.run` decides the verdicts; a send that fails here turns its
 * verdicts into retries, never into an ack.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { DeadLetterRecord } from "@factline/schemas"
import { DeadLetters } from "./DeadLetters.js"
import * as FirstAttempts from "./FirstAttempts.js"
import * as RetryPolicy from "./RetryPolicy.js"
import * as Runs from "./Runs.js"
import * as Verdict from "./Verdict.js"
import { Queues } from "../platform/Queues.js"

/** A batch whose verdicts are given (one per message, by index; the steps may turn one into a retry). */
export interface Settling {
  readonly policy: RetryPolicy.RetryPolicy
  /** Whether the queue keeps an inbox (its keys' first sight is there, not in FirstAttempts). */
  readonly inbox: boolean
  /** Which attempts the runs view records. */
  readonly runs: Runs.Level
  /** The queue the batch came from, as delivered (a group queue's own name: parked messages go back to it). */
  readonly deliveredOn: string
  readonly messages: ReadonlyArray<Message>
  /** The purpose the queue serves (`factline-events-3` → `factline-events`): the name records and logs use. */
  readonly queue: string
  /** The batch's start, as an ISO time. */
  readonly now: string
  readonly verdicts: Array<Verdict.Verdict>
}

const isLastAttempt = (policy: RetryPolicy.RetryPolicy, m: Message) => RetryPolicy.isLastAttempt(policy, m.attempts)

/** When the message was sent: the earliest its first attempt can have been (the fallback when none was recorded). */
const enqueuedAt = (m: Message) => new Date(m.timestamp).toISOString()

/**
 * 5. dead letters: sent (with context) before their originals are acked; a failed send turns them into retries.
 * A first attempt is this one on delivery 1; after retries, the one recorded when the first retry was decided
 * (FirstAttempts), else the send time, the earliest it can have been.
 */
export const sendDeadLetters = (b: Settling) =>
  Effect.gen(function*() {
    const { messages, queue, now, verdicts } = b
    const deadLetters = yield* DeadLetters
    const firstAttempts = yield* FirstAttempts.FirstAttempts
    const dead = verdicts.flatMap((v, i) => (v._tag === "DeadLetter" ? [{ v, m: messages[i]!, i }] : []))
    const unsettled = dead.filter(({ v, m }) => m.attempts > 1 && v.records.some((r) => r.firstAttemptedAt === undefined)).map(({ m }) => m.id)
    const recorded = unsettled.length === 0
      ? new Map<string, string>()
      : yield* firstAttempts.lookup(queue, unsettled).pipe(Effect.catch((error) =>
        Effect.as(Effect.logWarning(`first attempts unreadable on ${queue}, dead letters give their send time: ${error.message}`), new Map<string, string>())))
    const firstAttemptOf = (m: Message, r: Verdict.DeadRecord) => r.firstAttemptedAt ?? (m.attempts <= 1 ? now : recorded.get(m.id) ?? enqueuedAt(m))
    const deadRecords: Array<DeadLetterRecord> = dead.flatMap(({ v, m }) =>
      v.records.map((r) => ({
        original_message: r.body,
        failure: {
          reason: r.reason,
          last_error: Verdict.truncate(r.error),
          attempts: m.attempts,
          first_attempted_at: firstAttemptOf(m, r),
          last_attempted_at: now,
          queue,
          ...(r.stack === undefined ? {} : { stack: r.stack })
        }
      })))
    const sent = yield* Effect.result(deadLetters.send(queue, deadRecords))
    if (Result.isFailure(sent)) {
      // Nothing better than a retry is possible; on the last attempt the platform dead-letters the raw message,
      // so the context goes to the log at least.
      yield* Effect.logError(`dead-letter send failed on ${queue}: ${sent.failure.message}`, deadRecords.map((r) => r.failure))
      for (const { i } of dead) verdicts[i] = { _tag: "Retry", error: sent.failure.message }
    }
  })

/**
 * 5b. parked: sent again (same body, same queue, delayed) before their originals are acked; one send per delay.
 * A message handed back on its last allowed attempt is parked with no delay: a retry would dead-letter it.
 */
export const park = (b: Settling) =>
  Effect.gen(function*() {
    const { messages, policy, verdicts } = b
    const parked = verdicts.flatMap((v, i) =>
      v._tag === "Park" ? [{ v, m: messages[i]!, i }]
        : v._tag === "HandBack" && isLastAttempt(policy, messages[i]!) ? [{ v: { error: v.error, seconds: 0 }, m: messages[i]!, i }]
        : [])
    if (parked.length === 0) return
    const queues = yield* Queues
    for (const seconds of new Set(parked.map((p) => p.v.seconds))) {
      const group = parked.filter((p) => p.v.seconds === seconds)
      const resent = yield* Effect.result(queues.send(b.deliveredOn, group.map((p) => p.m.body), { delaySeconds: seconds }))
      if (Result.isFailure(resent)) for (const { v, i } of group) verdicts[i] = { _tag: "Retry", error: `${v.error}; parking it failed: ${resent.failure.message}` }
    }
  })

/**
 * 7. a first attempt that ends in a retry is recorded, for the dead letter a later attempt may write (best
 * effort: a refusal is logged and the retries go ahead). A queue with an inbox has its keys' first sight there.
 * The runs view's attempts (Runs) go in the same round trip; a batch with neither writes nothing.
 */
export const recordAttempts = (b: Settling, delays: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const { messages, policy, queue, now, verdicts } = b
    const runs = yield* Runs.Runs
    const firstAttempts = yield* FirstAttempts.FirstAttempts
    const firstRetries = b.inbox ? [] : verdicts.flatMap((v, i) => (v._tag === "Retry" && messages[i]!.attempts <= 1 ? [{ messageId: messages[i]!.id, firstAttemptedAt: now }] : []))
    const level = b.runs
    const at = (seconds: number) => new Date(Date.parse(now) + seconds * 1_000).toISOString()
    const attempts: ReadonlyArray<Runs.Attempt> = level === "none"
      ? []
      : verdicts.map((v, i) => Verdict.runsAttempt(v, messages[i]!, delays[i]!, isLastAttempt(policy, messages[i]!), at))
    if (attempts.some((a) => Runs.records(level, a))) {
      yield* runs.record(queue, level, attempts, FirstAttempts.statements(queue, firstRetries)).pipe(Effect.catch((error) =>
        Effect.logWarning(`runs${firstRetries.length > 0 ? " and first attempts" : ""} not recorded on ${queue}: ${error.message}`)))
    } else if (firstRetries.length > 0) {
      yield* firstAttempts.record(queue, firstRetries).pipe(Effect.catch((error) =>
        Effect.logWarning(`first attempts not recorded on ${queue} (their dead letters would give their send time): ${error.message}`)))
    }
  })

/** 8. settle each message on its own. Handed back: at once, not after the queue's backoff (it did not fail); on its last attempt it was parked. */
export const settle = (b: Settling, delays: ReadonlyArray<number>) =>
  b.verdicts.forEach((v, i) => {
    const m = b.messages[i]!
    if (v._tag === "Retry") m.retry({ delaySeconds: delays[i]! })
    else if (v._tag === "HandBack" && !isLastAttempt(b.policy, m)) m.retry({ delaySeconds: 0 })
    else m.ack()
  })
