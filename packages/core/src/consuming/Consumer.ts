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
import * as Failure from "../failures/Failure.js"
import * as AttemptLog from "./AttemptLog.js"
import * as Deadline from "./Deadline.js"
import * as Inbox from "./Inbox.js"
import * as RetryPolicy from "./RetryPolicy.js"
import type * as Runs from "./Runs.js"
import * as Settlement from "./Settlement.js"
import * as Verdict from "./Verdict.js"
import * as Time from "../platform/Time.js"

export { attemptLine, batchLine, handedBackLine, queueFields, traceIdsOf } from "./AttemptLog.js"
export type { LogLevel, QueueFields } from "./AttemptLog.js"

/**
 * The outcome of one item: done, or the family failure it ended with (`retryable` decides between a retry
 * and the dead-letter queue; `reason` is the dead letter's). Decoders fail with a family failure too.
 */
export type Outcome = Result.Result<void, Failure.Failure>

export const done: Outcome = Result.succeed(undefined)
export const failed = (failure: Failure.Failure): Outcome => Result.fail(failure)

/**
 * What the Worker's settings choose for every consumer (`FACTLINE_RETRY_DELAY_SCALE`, `FACTLINE_LOG_ATTEMPTS`,
 * `FACTLINE_RUNS`; `FACTLINE_CONSUMER_BUDGET_MS` is provided around the batch as `Deadline.Budget`).
 */
export interface Options {
  readonly delayScale?: number
  readonly log?: AttemptLog.LogLevel
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
  readonly log?: AttemptLog.LogLevel
  /** Which attempts the runs view records (Runs): all, those that do not succeed at once (default), or none. */
  readonly runs?: Runs.Level
  /** `true` for a queue that records each key's outcome in the D1 inbox (two round trips per batch). */
  readonly inbox?: boolean
  /** The message to dead-letter for one failed item of a message of several (default: the whole body). */
  readonly isolate?: (item: Item<T>) => unknown
}

/** One batch being run: what every step reads, and the verdicts the steps fill in (one per message, by index). */
interface Batch<T, R, P> extends Settlement.Settling {
  readonly spec: Spec<T, R, P>
  readonly fields: AttemptLog.QueueFields
  /** The batch's start: the deadline counts from it, and each log line's queue delay up to it. */
  readonly startedAt: number
  /** The invocation's time budget (`Deadline.Budget`, FACTLINE_CONSUMER_BUDGET_MS): `process` stops starting units once it is spent. */
  readonly budgetMs: number
}

/** What decoding left to process: each message's items (`undefined`: not decoded, its verdict given) and each key's value, once. */
interface Decoded<T> {
  readonly itemsOf: ReadonlyArray<ReadonlyArray<Item<T>> | undefined>
  readonly values: ReadonlyMap<string, T>
}

/**
 * 1. decode every message on its own; a bad one never stops the others. A decoder that throws is a bug or an
 * outage, not a verdict on the message: retry it.
 */
const decodeAll = <T, R, P>(b: Batch<T, R, P>) =>
  Effect.gen(function*() {
    const { messages, spec } = b
    const decoded = yield* Effect.forEach(
      messages,
      (m) => Effect.result(Effect.catchDefect(Effect.suspend(() => spec.decode(m.body, { id: m.id, attempts: m.attempts, last: RetryPolicy.isLastAttempt(spec.policy, m.attempts) })), (defect) =>
        Effect.fail(new Failure.TransientError({ message: `decoder failed: ${String(defect)}` })))),
      { concurrency: 16 }
    )
    const itemsOf = new Array<ReadonlyArray<Item<T>> | undefined>(messages.length)
    const values = new Map<string, T>()
    decoded.forEach((r, i) => {
      if (Result.isSuccess(r)) {
        itemsOf[i] = r.success
        for (const item of r.success) if (!values.has(item.key)) values.set(item.key, item.value)
      } else {
        b.verdicts[i] = Verdict.undecoded(spec.policy, messages[i]!, r.failure)
      }
    })
    return { itemsOf, values } satisfies Decoded<T>
  })

/**
 * 3. process what still needs work. A process step that dies (a bug, an exception outside an Effect) fails its
 * messages transiently, never the batch.
 */
const processTodo = <T, R, P>(b: Batch<T, R, P>, todo: ReadonlyArray<Item<T>>) =>
  todo.length === 0
    ? Effect.succeed(new Map<string, Outcome>() as ReadonlyMap<string, Outcome>)
    : Effect.catchCause(Effect.suspend(() => b.spec.process(todo)).pipe(Deadline.within(b.startedAt, b.budgetMs)), (cause) =>
      Effect.as(
        Effect.logError(`process step failed on ${b.queue}`, cause),
        new Map<string, Outcome>(todo.map(({ key }) => [key, failed(new Failure.TransientError({ message: `process step failed: ${String(Cause.squash(cause))}` }))]))
      ))

/**
 * 4. durable (inbox only): record every outcome in one round trip before acking anything (a key handed back
 * unstarted has no outcome yet: it stays as `begin` left it).
 */
const finishInbox = <T, R, P>(b: Batch<T, R, P>, todo: ReadonlyArray<Item<T>>, outcomes: ReadonlyMap<string, Outcome>, outcomeOf: (key: string) => Outcome) =>
  Effect.gen(function*() {
    if (b.spec.inbox !== true) return Result.succeed(undefined)
    const inbox = yield* Inbox.Inbox
    const handedBack = (key: string) => {
      const outcome = outcomes.get(key)
      return outcome !== undefined && Result.isFailure(outcome) && Deadline.isHandedBack(outcome.failure)
    }
    return yield* Effect.result(inbox.finish(b.queue, todo.filter(({ key }) => !handedBack(key)).map(({ key }) => {
      const outcome = outcomeOf(key)
      return Result.isSuccess(outcome)
        ? { idempotency_key: key, status: "succeeded" as const, last_error: null }
        : { idempotency_key: key, status: "failed" as const, last_error: Verdict.truncate(outcome.failure.message) }
    }), b.now))
  })

/**
 * 2–4. the decoded messages' work: the inbox (if kept) registers every key in one round trip and tells which are
 * already done; the rest is processed, its outcomes made durable (inbox) and each message given its verdict.
 */
const processDecoded = <T, R, P>(b: Batch<T, R, P>, { itemsOf, values }: Decoded<T>) =>
  Effect.gen(function*() {
    const { messages, spec, queue, verdicts } = b
    const inbox = yield* Inbox.Inbox
    const entries = spec.inbox !== true
      ? Result.succeed(new Map<string, Inbox.Entry>() as ReadonlyMap<string, Inbox.Entry>)
      : yield* Effect.result(inbox.begin(queue, [...values.keys()], b.now))
    if (Result.isFailure(entries)) {
      yield* Effect.logWarning(`inbox unavailable on ${queue}: ${entries.failure.message}`)
      itemsOf.forEach((items, i) => items !== undefined && (verdicts[i] = Verdict.retryOrExhausted(spec.policy, messages[i]!, entries.failure.message)))
      return
    }
    const todo = [...values].filter(([key]) => entries.success.get(key)?.status !== "succeeded").map(([key, value]) => ({ key, value }))
    const outcomes = yield* processTodo(b, todo)
    const outcomeOf = (key: string): Outcome =>
      entries.success.get(key)?.status === "succeeded" ? done : outcomes.get(key) ?? failed(new Failure.TransientError({ message: "no outcome was produced for this message" }))
    const finished = yield* finishInbox(b, todo, outcomes, outcomeOf)
    itemsOf.forEach((items, i) => {
      if (items === undefined) return
      const m = messages[i]!
      if (Result.isFailure(finished)) return void (verdicts[i] = Verdict.retryOrExhausted(spec.policy, m, finished.failure.message))
      const failures = items.flatMap((item) => {
        const outcome = outcomeOf(item.key)
        return Result.isFailure(outcome) ? [{ item, failure: outcome.failure }] : []
      })
      const firstSeenAt = failures.length === 0 ? undefined : entries.success.get(failures[0]!.item.key)?.first_seen_at
      verdicts[i] = Verdict.ofFailures(spec.policy, m, items, failures, firstSeenAt, spec.isolate)
    })
  })

export const run = <T, R, P>(spec: Spec<T, R, P>, batch: MessageBatch<unknown>) =>
  Effect.gen(function*() {
    // The purpose a group queue serves (`factline-events-3` → `factline-events`): the name dead-letter records,
    // the inbox and log lines use, as metrics, outboxes and the platform's own dead letters do. A replay routes
    // a record to its tenant's group queue afresh (DeadLetterStore), so the group need not be kept.
    const fields = AttemptLog.queueFields(batch.queue)
    const startedAt = yield* Time.millis
    const b: Batch<T, R, P> = {
      spec,
      policy: spec.policy,
      inbox: spec.inbox === true,
      runs: spec.runs ?? "failures",
      deliveredOn: batch.queue,
      messages: batch.messages,
      fields,
      queue: fields.queue,
      startedAt,
      now: new Date(startedAt).toISOString(),
      budgetMs: yield* Deadline.Budget,
      verdicts: new Array<Verdict.Verdict>(batch.messages.length)
    }
    yield* processDecoded(b, yield* decodeAll(b))
    yield* Settlement.sendDeadLetters(b)
    yield* Settlement.park(b)
    // 6. each retry's delay, decided now: the queue is told it when the message is settled, the runs view records it.
    const delays = b.verdicts.map((v, i) => Verdict.retryDelay(spec.policy, spec.delayScale ?? 1, v, b.messages[i]!))
    yield* Settlement.recordAttempts(b, delays)
    Settlement.settle(b, delays)
    // 9. log lines, and the batch's counts.
    return yield* AttemptLog.write(fields, b.messages, b.verdicts, spec.log ?? "batch", startedAt, b.budgetMs)
  }).pipe(Effect.withSpan("Consumer.run"))
