/**
 * The consumer runtime: one `MessageBatch` in, every message acked or retried
 * on its own.
 *
 * A message carries one item (an event) or several (the facts of a fact
 * message); each item is keyed by its idempotency key. For each message:
 * decode → (inbox check) → process its items → durable write → ack.
 * - undecodable / permanent failure → dead-lettered at once with its failure context, then acked;
 *   in a message of several items, only the failing item is dead-lettered (as its own message);
 * - transient failure → `retry({ delaySeconds })` from the queue's policy, jittered per message (the whole message:
 *   its items that succeeded are idempotent and cost nothing the second time);
 * - transient failure on the last allowed attempt → dead-lettered (`retries_exhausted`), then acked;
 * - a defect (product code that throws or dies: `Failure.Defect`) → retried on its own short budget (three attempts,
 *   about 2 s and 4 s apart), then dead-lettered with reason `defect` and its stack, then acked;
 * - a failure that only waits for something bound to end soon (`parkSeconds`: a tenant's writes held by a
 *   move) → parked: the same body sent again to the same queue after that delay, then acked — it spends
 *   none of the message's attempts, so a long hold never dead-letters it (a send that fails → a retry).
 * - work not started because the invocation's time budget was spent (Deadline: `FACTLINE_CONSUMER_BUDGET_MS`,
 *   checked by the process step between its units) → handed back: retried at once (`delaySeconds: 0`, not the
 *   queue's backoff: it did not fail; the queue still counts the attempt — Queues has no retry that does not),
 *   or, on its last allowed attempt, parked with no delay, so a hand-back never dead-letters a message. One
 *   warn line per batch says how many were handed back.
 * Nothing is acked before its outcome is durable (ledger append and relay, projection write,
 * or DLQ send). Never `retryAll`. Attempts come from the queue's own `attempts`. The events,
 * fact-processing and projections queues keep no inbox — their idempotency is the ledger's fact
 * ids and the projections' guarded writes — so their D1 round trips per batch are their own work;
 * a queue that opts into the inbox (batch) adds two round trips per batch (`begin`, `finish`),
 * whatever the batch size. Items that share a key in one batch are processed once and share the
 * outcome. A dead letter's `first_attempted_at` is the first processing attempt (FirstAttempts records it
 * when a first attempt ends in a retry). The runs view (Runs) records the attempts that do not succeed at
 * once (every attempt with `runs: "all"`) in that same round trip: a failing batch's one more round trip,
 * never — unless `runs: "all"` — a succeeding one's. Log lines (`LogLevel`): one per batch with its counts
 * and one per attempt that did not succeed; a line per acked attempt only when asked for (`all`).
 *
 * What "process" means is the caller's: the events consumer routes to
 * handlers; platform consumers plug in their own step.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { type DeadLetterRecord, type FailureReason, TraceContext } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import { DeadLetters, maxErrorLength } from "./DeadLetters.js"
import * as FirstAttempts from "./FirstAttempts.js"
import * as Deadline from "./Deadline.js"
import * as Inbox from "./Inbox.js"
import * as RetryPolicy from "./RetryPolicy.js"
import * as QueueGroups from "./QueueGroups.js"
import * as Runs from "./Runs.js"
import * as Time from "../platform/Time.js"
import { Queues } from "../platform/Queues.js"

/**
 * The outcome of one item: done, or the family failure it ended with (`retryable` decides between a retry
 * and the dead-letter queue; `reason` is the dead letter's). Decoders fail with a family failure too.
 */
export type Outcome = Result.Result<void, Failure.Failure>

export const done: Outcome = Result.succeed(undefined)
export const failed = (failure: Failure.Failure): Outcome => Result.fail(failure)

/**
 * Which log lines a batch writes (`FACTLINE_LOG_ATTEMPTS`): `batch` (default) — one line per batch with its
 * counts, and one per attempt that did not succeed (retried, parked, dead-lettered); `all` — that, and a
 * line per acked attempt too (opt-in: a line per message costs CPU on the hot path); `failures` — the
 * failures' lines alone; `none`.
 */
export type LogLevel = "all" | "batch" | "failures" | "none"

const text = (body: unknown, field: string): string | undefined => {
  if (typeof body !== "object" || body === null) return undefined
  const value = (body as Record<string, unknown>)[field]
  return typeof value === "string" ? value.slice(0, 256) : undefined
}

/**
 * The trace ids of the facts a fact message carries inline (`{ facts }` or `{ fact }`), distinct, in order
 * (at most 100); empty for any other message (an envelope's own trace is its `traceparent`).
 */
export const traceIdsOf = (body: unknown): ReadonlyArray<string> => {
  if (typeof body !== "object" || body === null) return []
  const payload = (body as { readonly payload?: unknown }).payload
  if (typeof payload !== "object" || payload === null) return []
  const { facts, fact } = payload as { readonly facts?: unknown; readonly fact?: unknown }
  const list: ReadonlyArray<unknown> = Array.isArray(facts) ? facts : fact === undefined ? [] : [fact]
  return TraceContext.traceIds(list.map((f) => (typeof f === "object" && f !== null ? (f as { readonly traceparent?: unknown }).traceparent : undefined)))
}

/** How a batch's queue appears in its log lines, read once per batch: its purpose, and its group for a group queue. */
export interface QueueFields {
  readonly queue: string
  readonly queue_group?: number
}

/** `factline-events-3` → `{ queue: "factline-events", queue_group: 3 }`; any other name as it is. */
export const queueFields = (batchQueue: string): QueueFields => {
  const parsed = QueueGroups.parse(batchQueue)
  return parsed?.group === undefined ? { queue: batchQueue } : { queue: parsed.policy.queue, queue_group: parsed.group }
}

const traceIds = (body: unknown) => {
  const ids = traceIdsOf(body)
  return ids.length === 0 ? {} : { trace_ids: ids }
}

/**
 * The structured log line of one processing attempt (Pattern 002's fields, and seed 003's `source`,
 * `queue_timestamp` and `processing_delay_ms`), as JSON that Workers Logs indexes. Never the payload: ids,
 * type, subject, the producing service (`source`), outcome, the error's class and first line, how long the
 * message waited on the queue (`processing_delay_ms`: the batch's start, `startedAt`, minus the message's
 * enqueue time `timestamp`; a retried message's counts from its first send, as Queues keeps it) and the
 * trace: the message's `traceparent`, and for a fact message the `trace_ids` of the facts it carries.
 * `queue` is the batch's queue read as its purpose (`factline-events-3` → `factline-events`, the name every
 * other record uses); a group queue's group is `queue_group`.
 */
export const attemptLine = (
  queue: QueueFields,
  m: { readonly id: string; readonly attempts: number; readonly body: unknown; readonly timestamp: Date },
  startedAt: number,
  outcome: "acked" | "retried" | "parked" | "dead_lettered" | "handed_back",
  errorClass?: string,
  error?: string
) => {
  const enqueuedAt = new Date(m.timestamp).getTime()
  return JSON.stringify({
    level: outcome === "acked" || outcome === "handed_back" ? "info" : outcome === "retried" || outcome === "parked" ? "warn" : "error",
    message: "queue message processed",
    ...queue,
    message_id: m.id,
    attempt: m.attempts,
    outcome,
    correlation_id: text(m.body, "correlation_id"),
    idempotency_key: text(m.body, "idempotency_key"),
    type: text(m.body, "message_type"),
    source: text(m.body, "source"),
    subject: text(m.body, "subject"),
    tenant_id: text(m.body, "tenant_id"),
    ...(Number.isFinite(enqueuedAt) ? { queue_timestamp: new Date(enqueuedAt).toISOString(), processing_delay_ms: Math.max(0, startedAt - enqueuedAt) } : {}),
    traceparent: text(m.body, "traceparent"),
    ...traceIds(m.body),
    ...(errorClass === undefined ? {} : { error_class: errorClass }),
    ...(error === undefined ? {} : { error: error.split("\n")[0]!.slice(0, 500) })
  })
}

/**
 * The one log line of a batch (`FACTLINE_LOG_ATTEMPTS=batch`, the default, and `all`): its queue, size and
 * counts — no per-message field, so it costs the same for 1 message or 100. Its failures have lines of their own.
 * `retried` counts the failed attempts retried; `parked` and `handed_back` (when any) are counted apart.
 */
export const batchLine = (
  queue: QueueFields,
  messages: number,
  counts: { readonly acked: number; readonly retried: number; readonly deadLettered: number; readonly deadLetteredByReason: Readonly<Record<string, number>>; readonly handedBack?: number },
  parked: number
) =>
  JSON.stringify({
    // Info whatever the counts: each failure has its own warn or error line.
    level: "info",
    message: "queue batch processed",
    ...queue,
    messages,
    acked: counts.acked,
    retried: counts.retried - parked - (counts.handedBack ?? 0),
    parked,
    ...((counts.handedBack ?? 0) > 0 ? { handed_back: counts.handedBack } : {}),
    dead_lettered: counts.deadLettered,
    ...(counts.deadLettered > 0 ? { dead_lettered_by_reason: counts.deadLetteredByReason } : {})
  })

/**
 * The warn line of a batch that handed work back (Deadline): how many of its messages go back to the queue
 * unstarted, how long the batch had run and its budget. Written whatever `FACTLINE_LOG_ATTEMPTS` says but `none`.
 */
export const handedBackLine = (queue: QueueFields, messages: number, handedBack: number, elapsedMs: number, budgetMs: number) =>
  JSON.stringify({
    level: "warn",
    message: "queue batch handed messages back before its time limit",
    ...queue,
    messages,
    handed_back: handedBack,
    elapsed_ms: elapsedMs,
    budget_ms: budgetMs
  })

/**
 * What the Worker's settings choose for every consumer (`FACTLINE_RETRY_DELAY_SCALE`, `FACTLINE_LOG_ATTEMPTS`,
 * `FACTLINE_RUNS`; `FACTLINE_CONSUMER_BUDGET_MS` is provided around the batch as `Deadline.Budget`).
 */
export interface Options {
  readonly delayScale?: number
  readonly log?: LogLevel
  readonly runs?: Runs.Level
}

/** The queue's view of a message being decoded. */
export interface Delivery {
  readonly id: string
  /** 1 on the first delivery. */
  readonly attempts: number
  /** Whether the policy allows no further retry after this attempt. */
  readonly last: boolean
}

export interface Item<T> {
  readonly key: string
  readonly value: T
}

export interface Spec<T, R, P = R> {
  readonly policy: RetryPolicy.RetryPolicy
  /** Decodes (and loads) one body into its items, each keyed by its idempotency key; `delivery` says which attempt this is. */
  readonly decode: (body: unknown, delivery: Delivery) => Effect.Effect<ReadonlyArray<Item<T>>, Failure.Failure, R>
  /** Processes the items that still need work (one per key); returns an outcome per key. */
  readonly process: (items: ReadonlyArray<Item<T>>) => Effect.Effect<ReadonlyMap<string, Outcome>, never, P>
  /** Multiplies every retry delay (tests use 0). Defaults to 1. */
  readonly delayScale?: number
  /** The batch's log lines (see `LogLevel`): its counts and its failures (default), every attempt, failures only, or none. */
  readonly log?: LogLevel
  /** Which attempts the runs view records (Runs): all, those that do not succeed at once (default), or none. */
  readonly runs?: Runs.Level
  /** `true` for a queue that records each key's outcome in the D1 inbox (two round trips per batch). */
  readonly inbox?: boolean
  /** The message to dead-letter for one failed item of a message of several (default: the whole body). */
  readonly isolate?: (item: Item<T>) => unknown
}

interface DeadRecord {
  readonly body: unknown
  readonly reason: FailureReason
  readonly error: string
  /** A defect's stack, kept in the record beside its error. */
  readonly stack?: string | undefined
  /** The inbox's first sight of the key (queues that keep one); otherwise settled when the record is sent. */
  readonly firstAttemptedAt?: string
}

type Verdict =
  | { readonly _tag: "Ack" }
  | { readonly _tag: "Retry"; readonly error: string; readonly atLeastSeconds?: number; readonly budget?: Failure.Budget; readonly errorClass?: string }
  | { readonly _tag: "Park"; readonly error: string; readonly seconds: number }
  /** Not started (the time budget was spent): retried at once, or parked on its last allowed attempt. */
  | { readonly _tag: "HandBack"; readonly error: string }
  | { readonly _tag: "DeadLetter"; readonly records: ReadonlyArray<DeadRecord> }

const truncate = (s: string) => (s.length > maxErrorLength ? `${s.slice(0, maxErrorLength)}…` : s)

export const run = <T, R, P>(spec: Spec<T, R, P>, batch: MessageBatch<unknown>) =>
  Effect.gen(function*() {
    const inbox = yield* Inbox.Inbox
    const deadLetters = yield* DeadLetters
    const firstAttempts = yield* FirstAttempts.FirstAttempts
    const runs = yield* Runs.Runs
    // The purpose a group queue serves (`factline-events-3` → `factline-events`): the name dead-letter records,
    // the inbox and log lines use, as metrics, outboxes and the platform's own dead letters do. A replay routes
    // a record to its tenant's group queue afresh (DeadLetterStore), so the group need not be kept.
    const fields = queueFields(batch.queue)
    const queue = fields.queue
    // The batch's start: the deadline counts from it, and each log line's queue delay up to it.
    const startedAt = yield* Time.millis
    const now = new Date(startedAt).toISOString()
    // The invocation's time budget (`Deadline.Budget`, FACTLINE_CONSUMER_BUDGET_MS): `process` stops starting units once it is spent.
    const budgetMs = yield* Deadline.Budget
    const messages = batch.messages
    const verdicts = new Array<Verdict>(messages.length)
    /** When the message was sent: the earliest its first attempt can have been (the fallback when none was recorded). */
    const enqueuedAt = (m: Message) => new Date(m.timestamp).toISOString()
    /**
     * A failure outside the message's own processing (loading, the inbox): retried, but on the last
     * allowed attempt dead-lettered here with its error — left to the platform, it would reach the DLQ
     * without any failure context.
     */
    const retryOrExhausted = (m: Message, error: string): Verdict =>
      RetryPolicy.isLastAttempt(spec.policy, m.attempts)
        ? { _tag: "DeadLetter", records: [{ body: m.body, reason: "retries_exhausted", error }] }
        : { _tag: "Retry", error }

    // 1. decode every message on its own; a bad one never stops the others.
    // A decoder that throws is a bug or an outage, not a verdict on the message: retry it.
    const decoded = yield* Effect.forEach(
      messages,
      (m) => Effect.result(Effect.catchDefect(Effect.suspend(() => spec.decode(m.body, { id: m.id, attempts: m.attempts, last: RetryPolicy.isLastAttempt(spec.policy, m.attempts) })), (defect) =>
        Effect.fail(new Failure.TransientError({ message: `decoder failed: ${String(defect)}` })))),
      { concurrency: 16 }
    )
    const itemsOf = new Array<ReadonlyArray<Item<T>> | undefined>(messages.length)
    const values = new Map<string, T>()
    decoded.forEach((r, i) => {
      const m = messages[i]!
      if (Result.isSuccess(r)) {
        itemsOf[i] = r.success
        for (const item of r.success) if (!values.has(item.key)) values.set(item.key, item.value)
      } else if (r.failure.retryable) {
        verdicts[i] = retryOrExhausted(m, r.failure.message)
      } else {
        verdicts[i] = { _tag: "DeadLetter", records: [{ body: m.body, reason: r.failure.reason, error: r.failure.message }] }
      }
    })

    // 2. inbox (if kept): one round trip registers every key and tells which are already done.
    const entries = spec.inbox !== true
      ? Result.succeed(new Map<string, Inbox.Entry>() as ReadonlyMap<string, Inbox.Entry>)
      : yield* Effect.result(inbox.begin(queue, [...values.keys()], now))
    if (Result.isFailure(entries)) {
      yield* Effect.logWarning(`inbox unavailable on ${queue}: ${entries.failure.message}`)
      itemsOf.forEach((items, i) => items !== undefined && (verdicts[i] = retryOrExhausted(messages[i]!, entries.failure.message)))
    } else {
      const todo = [...values].filter(([key]) => entries.success.get(key)?.status !== "succeeded").map(([key, value]) => ({ key, value }))

      // 3. process what still needs work.
      // A process step that dies (a bug, an exception outside an Effect) fails its messages transiently, never the batch.
      const outcomes = todo.length === 0
        ? new Map<string, Outcome>()
        : yield* Effect.catchCause(Effect.suspend(() => spec.process(todo)).pipe(Deadline.within(startedAt, budgetMs)), (cause) =>
          Effect.as(
            Effect.logError(`process step failed on ${queue}`, cause),
            new Map<string, Outcome>(todo.map(({ key }) => [key, failed(new Failure.TransientError({ message: `process step failed: ${String(Cause.squash(cause))}` }))]))
          ))
      const outcomeOf = (key: string): Outcome =>
        entries.success.get(key)?.status === "succeeded" ? done : outcomes.get(key) ?? failed(new Failure.TransientError({ message: "no outcome was produced for this message" }))

      // 4. durable (inbox only): record every outcome in one round trip before acking anything (a key handed
      // back unstarted has no outcome yet: it stays as `begin` left it).
      const handedBack = (key: string) => {
        const outcome = outcomes.get(key)
        return outcome !== undefined && Result.isFailure(outcome) && Deadline.isHandedBack(outcome.failure)
      }
      const finished = spec.inbox !== true
        ? Result.succeed(undefined)
        : yield* Effect.result(inbox.finish(queue, todo.filter(({ key }) => !handedBack(key)).map(({ key }) => {
          const outcome = outcomeOf(key)
          return Result.isSuccess(outcome)
            ? { idempotency_key: key, status: "succeeded" as const, last_error: null }
            : { idempotency_key: key, status: "failed" as const, last_error: truncate(outcome.failure.message) }
        }), now))

      itemsOf.forEach((items, i) => {
        if (items === undefined) return
        const m = messages[i]!
        if (Result.isFailure(finished)) return void (verdicts[i] = retryOrExhausted(m, finished.failure.message))
        const failures = items.flatMap((item) => {
          const outcome = outcomeOf(item.key)
          return Result.isFailure(outcome) ? [{ item, failure: outcome.failure }] : []
        })
        if (failures.length === 0) return void (verdicts[i] = { _tag: "Ack" })
        // Every failure only waits for a hold to end: parked, whatever the attempt.
        if (failures.every((f) => f.failure.retryable && f.failure.parkSeconds !== undefined)) {
          return void (verdicts[i] = { _tag: "Park", error: failures[0]!.failure.message, seconds: Math.max(...failures.map((f) => f.failure.parkSeconds!)) })
        }
        // Its only retryable failures are work handed back unstarted: handed back (a permanent sibling is
        // dead-lettered on the delivery that settles the message, as beside any retry).
        const retryable = failures.filter((f) => f.failure.retryable)
        if (retryable.length > 0 && retryable.every((f) => Deadline.isHandedBack(f.failure))) {
          return void (verdicts[i] = { _tag: "HandBack", error: retryable[0]!.failure.message })
        }
        const last = RetryPolicy.isLastAttempt(spec.policy, m.attempts)
        // A failure with a budget of its own (a defect's) is settled like a permanent one once that budget is spent.
        const spent = (f: Failure.Failure) => f.budget !== undefined && m.attempts >= f.budget.maxAttempts
        const retrying = failures.find((f) => f.failure.retryable && !spent(f.failure))
        // A retryable failure retries the whole message; its permanent siblings are dead-lettered when it settles.
        if (retrying && !last) {
          const atLeast = Math.max(0, ...failures.map((f) => f.failure.retryAfterSeconds ?? 0))
          // Only budgeted failures to retry (defects): their short delays, not the queue's.
          const budget = failures.every((f) => !f.failure.retryable || f.failure.budget !== undefined) ? retrying.failure.budget : undefined
          return void (verdicts[i] = {
            _tag: "Retry",
            error: retrying.failure.message,
            ...(atLeast > 0 ? { atLeastSeconds: atLeast } : {}),
            ...(budget === undefined ? {} : { budget, errorClass: retrying.failure.reason })
          })
        }
        const firstSeenAt = entries.success.get(failures[0]!.item.key)?.first_seen_at
        const alone = items.length === 1 || spec.isolate === undefined
        verdicts[i] = {
          _tag: "DeadLetter",
          records: (alone ? failures.slice(0, 1) : failures).map(({ item, failure }) => {
            const stack = (alone ? failures.find((f) => f.failure.defectStack !== undefined)?.failure : failure)?.defectStack
            return {
              body: alone ? m.body : spec.isolate!(item),
              reason: failure.retryable && failure.budget === undefined ? "retries_exhausted" : failure.reason,
              error: alone && failures.length > 1 ? failures.map((f) => `${f.item.key}: ${f.failure.message}`).join("; ") : failure.message,
              ...(stack === undefined ? {} : { stack }),
              ...(firstSeenAt === undefined ? {} : { firstAttemptedAt: firstSeenAt })
            }
          })
        }
      })
    }

    // 5. dead letters: sent (with context) before their originals are acked. A first attempt is this one on
    // delivery 1; after retries, the one recorded when the first retry was decided (FirstAttempts), else the
    // send time, the earliest it can have been.
    const dead = verdicts.flatMap((v, i) => (v._tag === "DeadLetter" ? [{ v, m: messages[i]!, i }] : []))
    const unsettled = dead.filter(({ v, m }) => m.attempts > 1 && v.records.some((r) => r.firstAttemptedAt === undefined)).map(({ m }) => m.id)
    const recorded = unsettled.length === 0
      ? new Map<string, string>()
      : yield* firstAttempts.lookup(queue, unsettled).pipe(Effect.catch((error) =>
        Effect.as(Effect.logWarning(`first attempts unreadable on ${queue}, dead letters give their send time: ${error.message}`), new Map<string, string>())))
    const firstAttemptOf = (m: Message, r: DeadRecord) => r.firstAttemptedAt ?? (m.attempts <= 1 ? now : recorded.get(m.id) ?? enqueuedAt(m))
    const deadRecords: Array<DeadLetterRecord> = dead.flatMap(({ v, m }) =>
      v.records.map((r) => ({
        original_message: r.body,
        failure: {
          reason: r.reason,
          last_error: truncate(r.error),
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

    // 5b. parked: sent again (same body, same queue, delayed) before their originals are acked; one send per delay.
    // A message handed back on its last allowed attempt is parked with no delay: a retry would dead-letter it.
    const lastAttempt = (m: Message) => RetryPolicy.isLastAttempt(spec.policy, m.attempts)
    const parked = verdicts.flatMap((v, i) =>
      v._tag === "Park" ? [{ v, m: messages[i]!, i }]
        : v._tag === "HandBack" && lastAttempt(messages[i]!) ? [{ v: { error: v.error, seconds: 0 }, m: messages[i]!, i }]
        : [])
    if (parked.length > 0) {
      const queues = yield* Queues
      for (const seconds of new Set(parked.map((p) => p.v.seconds))) {
        const group = parked.filter((p) => p.v.seconds === seconds)
        const resent = yield* Effect.result(queues.send(batch.queue, group.map((p) => p.m.body), { delaySeconds: seconds }))
        if (Result.isFailure(resent)) for (const { v, i } of group) verdicts[i] = { _tag: "Retry", error: `${v.error}; parking it failed: ${resent.failure.message}` }
      }
    }

    // 6. each retry's delay, decided now: the queue is told it when the message is settled, the runs view records it.
    const scale = spec.delayScale ?? 1
    const delays = verdicts.map((v, i) => {
      if (v._tag !== "Retry") return 0
      const m = messages[i]!
      // A budgeted failure (a defect) retries on its own short delays, not the queue's.
      const policy = v.budget === undefined ? spec.policy : { ...spec.policy, initialDelaySeconds: v.budget.initialDelaySeconds, maxDelaySeconds: v.budget.maxDelaySeconds }
      const policyDelay = Math.ceil(RetryPolicy.delay(policy, m.attempts, RetryPolicy.jitterOf(m.id, m.attempts)) * scale)
      // A receiver's Retry-After is honoured as given (never scaled), up to the policy's maximum delay.
      const atLeast = Math.min(v.atLeastSeconds ?? 0, spec.policy.maxDelaySeconds)
      return Math.max(policyDelay, Math.ceil(atLeast))
    })

    // 7. a first attempt that ends in a retry is recorded, for the dead letter a later attempt may write (best
    // effort: a refusal is logged and the retries go ahead). A queue with an inbox has its keys' first sight there.
    // The runs view's attempts (Runs) go in the same round trip; a batch with neither writes nothing.
    const firstRetries = spec.inbox === true ? [] : verdicts.flatMap((v, i) => (v._tag === "Retry" && messages[i]!.attempts <= 1 ? [{ messageId: messages[i]!.id, firstAttemptedAt: now }] : []))
    const level = spec.runs ?? "failures"
    const at = (seconds: number) => new Date(Date.parse(now) + seconds * 1_000).toISOString()
    const attempts: ReadonlyArray<Runs.Attempt> = level === "none" ? [] : verdicts.map((v, i) => {
      const m = messages[i]!
      const common = { messageId: m.id, attempt: m.attempts, body: m.body }
      switch (v._tag) {
        case "Ack": return { ...common, outcome: "ok" }
        case "Retry": return { ...common, outcome: "retry", error: v.error, nextRetryAt: at(delays[i]!) }
        case "Park": return { ...common, outcome: "park", error: v.error, nextRetryAt: at(v.seconds) }
        case "HandBack": return { ...common, outcome: lastAttempt(m) ? "park" : "retry", error: v.error, nextRetryAt: at(0) }
        case "DeadLetter": return { ...common, outcome: "dead", error: v.records[0]?.error ?? "dead-lettered" }
      }
    })
    if (attempts.some((a) => Runs.records(level, a))) {
      yield* runs.record(queue, level, attempts, FirstAttempts.statements(queue, firstRetries)).pipe(Effect.catch((error) =>
        Effect.logWarning(`runs${firstRetries.length > 0 ? " and first attempts" : ""} not recorded on ${queue}: ${error.message}`)))
    } else if (firstRetries.length > 0) {
      yield* firstAttempts.record(queue, firstRetries).pipe(Effect.catch((error) =>
        Effect.logWarning(`first attempts not recorded on ${queue} (their dead letters would give their send time): ${error.message}`)))
    }

    // 8. settle each message on its own.
    verdicts.forEach((v, i) => {
      const m = messages[i]!
      if (v._tag === "Retry") m.retry({ delaySeconds: delays[i]! })
      // Handed back: at once, not after the queue's backoff (it did not fail); on its last attempt it was parked.
      else if (v._tag === "HandBack" && !lastAttempt(m)) m.retry({ delaySeconds: 0 })
      else m.ack()
    })
    // 9. log lines: a line per attempt that did not succeed (its trace read from that message alone), a line per
    // acked attempt only with `all`, and one line for the batch with its counts (`batch`, `all`). Work handed back
    // unstarted: a line per message only with `all`, and one warn line for the batch with how many (but `none`).
    const log = spec.log ?? "batch"
    const counts = { acked: 0, retried: 0, handedBack: 0, deadLettered: 0, deadLetteredByReason: {} as Record<string, number> }
    let parkedCount = 0
    for (let i = 0; i < verdicts.length; i++) {
      const v = verdicts[i]!
      if (v._tag === "Ack") {
        counts.acked++
        if (log === "all") console.log(attemptLine(fields, messages[i]!, startedAt, "acked"))
        continue
      }
      // Retried (or parked on its last attempt) for the queue: counted as a retry, and apart.
      if (v._tag === "HandBack") {
        counts.retried++
        counts.handedBack++
        if (log === "all") console.log(attemptLine(fields, messages[i]!, startedAt, "handed_back"))
        continue
      }
      // A parked message comes back as a new one: counted as a retry, as it is one for the queue's health.
      if (v._tag === "Retry" || v._tag === "Park") {
        counts.retried++
        if (v._tag === "Park") parkedCount++
      } else {
        counts.deadLettered++
        // One count per message, under its first record's reason (as its log line): the reasons sum to `deadLettered`.
        const reason = v.records[0]?.reason ?? "unknown"
        counts.deadLetteredByReason[reason] = (counts.deadLetteredByReason[reason] ?? 0) + 1
      }
      if (log === "none") continue
      const m = messages[i]!
      if (v._tag === "Retry") console.warn(attemptLine(fields, m, startedAt, "retried", v.errorClass ?? "transient", v.error))
      else if (v._tag === "Park") console.warn(attemptLine(fields, m, startedAt, "parked", "held", v.error))
      else console.error(attemptLine(fields, m, startedAt, "dead_lettered", v.records[0]?.reason, v.records[0]?.error))
    }
    if (counts.handedBack > 0 && log !== "none") {
      console.warn(handedBackLine(fields, messages.length, counts.handedBack, (yield* Time.millis) - startedAt, budgetMs))
    }
    if (log === "batch" || log === "all") console.log(batchLine(fields, messages.length, counts, parkedCount))
    return counts
  }).pipe(Effect.withSpan("Consumer.run"))
