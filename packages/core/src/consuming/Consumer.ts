/**
 * The consumer runtime: one `MessageBatch` in, every message acked or retried
 * on its own.
 *
 * For each message: decode → inbox check → process → durable write → ack.
 * - undecodable / permanent failure → dead-lettered at once with its failure context, then acked;
 * - transient failure → `retry({ delaySeconds })` from the queue's policy;
 * - transient failure on the last allowed attempt → dead-lettered (`retries_exhausted`), then acked;
 * - already succeeded (inbox) → acked without work.
 * Nothing is acked before its outcome is durable (ledger append and inbox
 * write, or DLQ send). Never `retryAll`. D1 work is two round trips per
 * batch (inbox `begin` and `finish`), whatever the batch size — none for a
 * queue that opts out of the inbox because its writes are idempotent anyway. Messages that
 * share an idempotency key in one batch are processed once and share the outcome.
 *
 * What "process" means is the caller's: the events consumer routes to
 * handlers; platform consumers plug in their own step.
 */
import { Cause, Effect, Result } from "effect"
import type { DeadLetterRecord, FailureReason } from "@factline/schemas"
import { DeadLetters, maxErrorLength } from "./DeadLetters.js"
import * as Inbox from "./Inbox.js"
import * as RetryPolicy from "./RetryPolicy.js"

/** Why a message could not even be decoded/loaded. Permanent unless `transient`. */
export interface Rejection {
  readonly reason: FailureReason
  readonly error: string
  readonly transient?: boolean
}

export type Outcome =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Failed"; readonly transient: boolean; readonly reason: FailureReason; readonly error: string }

export const done: Outcome = { _tag: "Done" }
export const transient = (error: string): Outcome => ({ _tag: "Failed", transient: true, reason: "retries_exhausted", error })
export const permanent = (reason: FailureReason, error: string): Outcome => ({ _tag: "Failed", transient: false, reason, error })

/**
 * The outcome of product code that failed: a `PermanentError` is permanent;
 * everything else — a `TransientError`, an infrastructure error, a thrown
 * exception — is transient.
 */
export const fromCause = (cause: Cause.Cause<unknown>): Outcome => {
  const error = Cause.squash(cause)
  if (typeof error === "object" && error !== null && "_tag" in error) {
    const tagged = error as { readonly _tag: string; readonly message?: string }
    if (tagged._tag === "PermanentError") return permanent("permanent_failure", tagged.message ?? "permanent failure")
    return transient(`${tagged._tag}: ${tagged.message ?? ""}`)
  }
  return transient(error instanceof Error ? `${error.name}: ${error.message}` : String(error))
}

export interface Spec<T, R, P = R> {
  readonly policy: RetryPolicy.RetryPolicy
  /** Decodes (and loads) one body. The key is the idempotency key. */
  readonly decode: (body: unknown) => Effect.Effect<{ readonly key: string; readonly value: T }, Rejection, R>
  /** Processes the items that still need work (one per key); returns an outcome per key. */
  readonly process: (items: ReadonlyArray<{ readonly key: string; readonly value: T }>) => Effect.Effect<ReadonlyMap<string, Outcome>, never, P>
  /** Multiplies every retry delay (tests use 0). Defaults to 1. */
  readonly delayScale?: number
  /** The ledger shard an item will append to, registered in the inbox round trip before processing. */
  readonly shardOf?: (value: T) => Inbox.ShardRegistration | undefined
  /**
   * `false` for a queue whose processing is idempotent by construction (projections):
   * no inbox round trips; duplicates are absorbed by the writes themselves.
   */
  readonly inbox?: boolean
}

type Verdict =
  | { readonly _tag: "Ack" }
  | { readonly _tag: "Retry"; readonly error: string }
  | { readonly _tag: "DeadLetter"; readonly reason: FailureReason; readonly error: string; readonly firstAttemptedAt: string }

const truncate = (s: string) => (s.length > maxErrorLength ? `${s.slice(0, maxErrorLength)}…` : s)

export const run = <T, R, P>(spec: Spec<T, R, P>, batch: MessageBatch<unknown>) =>
  Effect.gen(function*() {
    const inbox = yield* Inbox.Inbox
    const deadLetters = yield* DeadLetters
    const queue = batch.queue
    const now = new Date().toISOString()
    const messages = batch.messages
    const verdicts = new Array<Verdict>(messages.length)
    const enqueuedAt = (m: Message) => new Date(m.timestamp).toISOString()

    // 1. decode every message on its own; a bad one never stops the others.
    // A decoder that throws is a bug or an outage, not a verdict on the message: retry it.
    const decoded = yield* Effect.forEach(
      messages,
      (m) => Effect.result(Effect.catchDefect(Effect.suspend(() => spec.decode(m.body)), (defect) =>
        Effect.fail<Rejection>({ reason: "decode_error", error: `decoder failed: ${String(defect)}`, transient: true }))),
      { concurrency: 16 }
    )
    const keyOf = new Array<string | undefined>(messages.length)
    const values = new Map<string, T>()
    decoded.forEach((r, i) => {
      if (Result.isSuccess(r)) {
        keyOf[i] = r.success.key
        if (!values.has(r.success.key)) values.set(r.success.key, r.success.value)
      } else if (r.failure.transient) {
        verdicts[i] = { _tag: "Retry", error: r.failure.error }
      } else {
        verdicts[i] = { _tag: "DeadLetter", reason: r.failure.reason, error: r.failure.error, firstAttemptedAt: enqueuedAt(messages[i]!) }
      }
    })

    // 2. inbox: one round trip registers every key and tells which are already done.
    const shards = new Map<string, Inbox.ShardRegistration>()
    for (const value of values.values()) {
      const shard = spec.shardOf?.(value)
      if (shard) shards.set(shard.shard_key, shard)
    }
    const entries = spec.inbox === false
      ? Result.succeed(new Map<string, Inbox.Entry>() as ReadonlyMap<string, Inbox.Entry>)
      : yield* Effect.result(inbox.begin(queue, [...values.keys()], now, [...shards.values()]))
    if (Result.isFailure(entries)) {
      yield* Effect.logWarning(`inbox unavailable on ${queue}: ${entries.failure.message}`)
      keyOf.forEach((key, i) => key !== undefined && (verdicts[i] = { _tag: "Retry", error: entries.failure.message }))
    } else {
      const todo = [...values].filter(([key]) => entries.success.get(key)?.status !== "succeeded").map(([key, value]) => ({ key, value }))

      // 3. process what still needs work.
      // A process step that dies (a bug, an exception outside an Effect) fails its messages transiently, never the batch.
      const outcomes = todo.length === 0
        ? new Map<string, Outcome>()
        : yield* Effect.catchCause(Effect.suspend(() => spec.process(todo)), (cause) =>
          Effect.as(
            Effect.logError(`process step failed on ${queue}`, cause),
            new Map<string, Outcome>(todo.map(({ key }) => [key, transient(`process step failed: ${String(Cause.squash(cause))}`)]))
          ))

      // 4. durable: record every outcome in one round trip before acking anything.
      const records: Array<Inbox.Outcome> = todo.flatMap(({ key }) => {
        const outcome = outcomes.get(key) ?? transient("no outcome was produced for this message")
        return [outcome._tag === "Done"
          ? { idempotency_key: key, status: "succeeded", last_error: null }
          : { idempotency_key: key, status: "failed", last_error: truncate(outcome.error) }]
      })
      const finished = spec.inbox === false ? Result.succeed(undefined) : yield* Effect.result(inbox.finish(queue, records, now))

      keyOf.forEach((key, i) => {
        if (key === undefined) return
        const entry = entries.success.get(key)
        if (entry?.status === "succeeded") return void (verdicts[i] = { _tag: "Ack" })
        const outcome = outcomes.get(key) ?? transient("no outcome was produced for this message")
        if (Result.isFailure(finished)) return void (verdicts[i] = { _tag: "Retry", error: finished.failure.message })
        if (outcome._tag === "Done") return void (verdicts[i] = { _tag: "Ack" })
        const firstAttemptedAt = entry?.first_seen_at ?? enqueuedAt(messages[i]!)
        if (!outcome.transient) return void (verdicts[i] = { _tag: "DeadLetter", reason: outcome.reason, error: outcome.error, firstAttemptedAt })
        verdicts[i] = RetryPolicy.isLastAttempt(spec.policy, messages[i]!.attempts)
          ? { _tag: "DeadLetter", reason: "retries_exhausted", error: outcome.error, firstAttemptedAt }
          : { _tag: "Retry", error: outcome.error }
      })
    }

    // 5. dead letters: sent (with context) before their originals are acked.
    const dead = verdicts.flatMap((v, i) => (v._tag === "DeadLetter" ? [{ v, m: messages[i]!, i }] : []))
    const deadRecords: Array<DeadLetterRecord> = dead.map(({ v, m }) => ({
      original_message: m.body,
      failure: {
        reason: v.reason,
        last_error: truncate(v.error),
        attempts: m.attempts,
        first_attempted_at: v.firstAttemptedAt,
        last_attempted_at: now,
        queue
      }
    }))
    const sent = yield* Effect.result(deadLetters.send(queue, deadRecords))
    if (Result.isFailure(sent)) {
      yield* Effect.logError(`dead-letter send failed on ${queue}: ${sent.failure.message}`)
      for (const { i } of dead) verdicts[i] = { _tag: "Retry", error: sent.failure.message }
    }

    // 6. settle each message on its own.
    const scale = spec.delayScale ?? 1
    verdicts.forEach((v, i) => {
      const m = messages[i]!
      if (v._tag === "Retry") m.retry({ delaySeconds: Math.round(RetryPolicy.delay(spec.policy, m.attempts) * scale) })
      else m.ack()
    })
    const counts = { acked: 0, retried: 0, deadLettered: 0 }
    for (const v of verdicts) v._tag === "Retry" ? counts.retried++ : v._tag === "DeadLetter" ? counts.deadLettered++ : counts.acked++
    return counts
  })
