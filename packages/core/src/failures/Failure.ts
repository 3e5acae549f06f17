/**
 * The one failure model of factline: a small family of tagged errors shared by every store, consumer and
 * HTTP route. Each error carries its behaviour on the type, decided here once:
 *
 * - `status`: the HTTP status an API route answers with (as `httpApiStatus` on Effect's `HttpApiError`s);
 * - `retryable`: whether trying again may succeed (as `isRetryable` on Effect's `SqlError` reasons) — a
 *   consumer retries a retryable failure with its queue's backoff and dead-letters any other at once;
 * - `code`: the machine-readable `code` of the API's `Problem`.
 *
 * `TransientError` and `PermanentError` are the two a product team's handlers, deciders and processors
 * fail with; the others are the platform's. `classify` is the one reading of a failed `Cause`: the
 * consumer runtime and the HTTP edge never match tag strings.
 *
 * It does not render responses (the HTTP edge does, from `status`, `code`, `publicMessage` and `details`)
 * and knows nothing of queues.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { FailureReason, Issues } from "@factline/schemas"

/** Marks a member of the family; a module with a failure richer than the common ones implements `Failure` with it. */
export const TypeId = "~@factline/core/Failure" as const

/** One field at fault: its path (`events.2.payload.amount`) and what is wrong with it (`Issues.Problem`). */
export const Problem = Issues.Problem
export type Problem = Issues.Problem

/** What every member of the family answers. */
export interface Failure {
  readonly [TypeId]: typeof TypeId
  readonly _tag: string
  readonly message: string
  readonly status: number
  readonly code: string
  readonly retryable: boolean
  /** What the API may tell the caller: never a stack, SQL text or a secret. */
  readonly publicMessage: string
  /** The `details` of the API's `Problem`, where there are any. */
  readonly details?: unknown
  /** The dead-letter reason of a message that fails this way and is not retried. */
  readonly reason: FailureReason
  /**
   * Set on a retryable failure that waits for something bound to end soon (a tenant's writes held by a move):
   * a consumer parks the message — sends it again after this many seconds and acks it — instead of spending
   * one of its attempts.
   */
  readonly parkSeconds?: number | undefined
  /** The least delay before trying again (a receiver's `Retry-After`), in seconds. */
  readonly retryAfterSeconds?: number | undefined
  /**
   * A shorter retry budget than the queue's, for a retryable failure that more attempts are unlikely to fix (a
   * defect): at most `maxAttempts` attempts, retried after `min(initialDelaySeconds · 2^(n−1), maxDelaySeconds)`
   * (jittered like the queue's); dead-lettered with `reason` once spent.
   */
  readonly budget?: Budget | undefined
  /** Where a defect came from (its stack), kept in its dead letter's `stack` beside `last_error`. */
  readonly defectStack?: string | undefined
}

export interface Budget {
  readonly maxAttempts: number
  readonly initialDelaySeconds: number
  readonly maxDelaySeconds: number
}

/**
 * A defect's budget: three attempts, retried after about 2 s and 4 s — a fluke (a dependency's client throwing
 * once) gets another chance, a bug reaches the dead letters within seconds instead of after the queue's whole
 * budget (15 minutes on the events queue).
 */
export const defectBudget: Budget = { maxAttempts: 3, initialDelaySeconds: 2, maxDelaySeconds: 10 }

/** Stacks are kept in a dead letter up to this length (the frames that matter come first). */
export const maxStackLength = 4_000

export const isFailure = (u: unknown): u is Failure => Predicate.hasProperty(u, TypeId)

const problemsDetails = (problems: ReadonlyArray<Problem> | undefined) => (problems === undefined ? undefined : { problems })

/** 400: the caller's input is wrong; `problems` names each field. Never retried. */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  message: Schema.String,
  code: Schema.String.pipe(Schema.withConstructorDefault(Effect.succeed("invalid_request"))),
  problems: Schema.optional(Schema.Array(Problem))
}) {
  readonly [TypeId] = TypeId
  get status() { return 400 }
  get retryable() { return false }
  get reason(): FailureReason { return "decode_error" }
  get publicMessage() { return this.message }
  get details(): unknown { return problemsDetails(this.problems) }
}

/** 404: what was asked for does not exist (for this tenant). */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {
  readonly [TypeId] = TypeId
  get status() { return 404 }
  get code() { return "not_found" }
  get retryable() { return false }
  get reason(): FailureReason { return "permanent_failure" }
  get publicMessage() { return this.message }
}

/** 409: the request contradicts the stored state (a state transition not allowed, a key bound to another payload). */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  message: Schema.String,
  code: Schema.String.pipe(Schema.withConstructorDefault(Effect.succeed("conflict"))),
  details: Schema.optional(Schema.Unknown)
}) {
  readonly [TypeId] = TypeId
  get status() { return 409 }
  get retryable() { return false }
  get reason(): FailureReason { return "permanent_failure" }
  get publicMessage() { return this.message }
}

/**
 * 503: a dependency (`service`: "the ledger", "the projection store"…) could not be reached. Retryable.
 * `message` is for the log and may hold a driver's text; the API says only which service.
 */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  service: Schema.String,
  message: Schema.String,
  retryAfterSeconds: Schema.optional(Schema.Number),
  parkSeconds: Schema.optional(Schema.Number)
}) {
  readonly [TypeId] = TypeId
  get status() { return 503 }
  get code() { return "unavailable" }
  get retryable() { return true }
  get reason(): FailureReason { return "retries_exhausted" }
  get publicMessage() { return `${this.service} is unavailable, retry later` }
}

/** A handler's, decider's or processor's "try again later": retried with the queue's backoff. */
export class TransientError extends Schema.TaggedError<TransientError>()("TransientError", {
  message: Schema.String,
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {
  readonly [TypeId] = TypeId
  get status() { return 503 }
  get code() { return "unavailable" }
  get retryable() { return true }
  get reason(): FailureReason { return "retries_exhausted" }
  get publicMessage() { return "retry later" }
}

/**
 * A message that can never succeed: dead-lettered at once with `reason` (`permanent_failure` unless the
 * platform says more: `decode_error`, `unknown_message_type`, `payload_missing`, `idempotency_conflict`…).
 * The one a product team's code fails with to refuse a message.
 */
export class PermanentError extends Schema.TaggedError<PermanentError>()("PermanentError", {
  message: Schema.String,
  reason: FailureReason.pipe(Schema.withConstructorDefault(Effect.succeed<FailureReason>("permanent_failure")))
}) {
  readonly [TypeId] = TypeId
  get status() { return 422 }
  get code() { return "unprocessable" }
  get retryable() { return false }
  get publicMessage() { return this.message }
}

/**
 * A bug in product code (a handler's, decider's or processor's): a throw or an `Effect.die`, not the typed
 * `TransientError` / `PermanentError` it fails with on purpose. Retried on the short `defectBudget`, then
 * dead-lettered with reason `defect`, its message in `last_error` and its stack in the dead letter's `stack`.
 * (`defectStack`, not `stack`: an error's own `stack` is where it was raised, here in the runtime.)
 */
export class Defect extends Schema.TaggedError<Defect>()("Defect", {
  message: Schema.String,
  defectStack: Schema.optional(Schema.String)
}) {
  readonly [TypeId] = TypeId
  get status() { return 500 }
  get code() { return "internal" }
  get retryable() { return true }
  get reason(): FailureReason { return "defect" }
  get publicMessage() { return "internal error" }
  get budget(): Budget { return defectBudget }
}

/**
 * 500: a fault in the platform's own code or schema, found by a dependency — a statement D1 cannot run (bad SQL,
 * a missing column or table, too many bound parameters, a type D1 cannot bind) or a row that does not match the
 * schema its reader declared. Not retryable: the same statement fails the same way, so a consumer dead-letters
 * the message at once with reason `defect` instead of spending the queue's budget on it. `service` names the
 * database ("the platform database"); `message` is for the log (the driver's text, the statement, the field) and
 * never reaches the API. `missingTable`: the table the statement named that does not exist, where that is the
 * fault (a projection whose migration was never applied).
 */
export class Bug extends Schema.TaggedError<Bug>()("Bug", {
  service: Schema.String,
  message: Schema.String,
  missingTable: Schema.optional(Schema.String)
}) {
  readonly [TypeId] = TypeId
  get status() { return 500 }
  get code() { return "internal" }
  get retryable() { return false }
  get reason(): FailureReason { return "defect" }
  get publicMessage() { return "internal error" }
}

/** The two a product team's code fails with. */
export type HandlerError = TransientError | PermanentError

/** Every member of the family core raises. */
export type Any = InvalidInput | NotFound | Conflict | Unavailable | TransientError | PermanentError | Defect | Bug

/** An error's text for a log line or a dead letter: `Name: message` for anything but a family member's own. */
export const describe = (error: unknown): string =>
  isFailure(error)
    ? error.message
    : error instanceof Error
      ? `${error.name}: ${error.message}`
      : Predicate.hasProperty(error, "_tag") && typeof error._tag === "string"
        ? `${error._tag}: ${Predicate.hasProperty(error, "message") ? String(error.message) : ""}`
        : String(error)

/**
 * The one reading of a failed `Cause` as a family member: a member is itself (a product's `TransientError`
 * keeps its tag in the text, as the dead letter has always shown it); a defect — a throw, an `Effect.die` —
 * is a `Defect` naming it, with its stack; anything else — another tagged error, an interruption — is a
 * `TransientError` naming it (retried, then dead-lettered with its text when retries run out).
 */
export const classify = (cause: Cause.Cause<unknown>): Failure => {
  const error = Cause.squash(cause)
  if (isFailure(error)) {
    return error instanceof TransientError ? new TransientError({ message: `TransientError: ${error.message}`, ...retryAfter(error) }) : error
  }
  if (Cause.hasDies(cause) && !Cause.hasFails(cause)) return defectOf(error, cause)
  return new TransientError({ message: describe(error) })
}

/** A defect's `Defect`: its text, and its stack (the thrown error's own, else the cause's rendering), capped. */
const defectOf = (error: unknown, cause: Cause.Cause<unknown>): Defect => {
  const stack = error instanceof Error && typeof error.stack === "string" && error.stack.length > 0 ? error.stack : Cause.pretty(cause)
  return new Defect({ message: describe(error), defectStack: stack.length > maxStackLength ? `${stack.slice(0, maxStackLength)}…` : stack })
}

const retryAfter = (error: TransientError) => (error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds })

/**
 * A binding's failure named after the store that met it: `Unavailable` for `service` with the cause's text — the
 * usual `Effect.mapError` of a binding call — except a failure the binding's door already classified as not
 * retryable (a `Bug`, a `Conflict`: see `platform/Sql`), which stays what it is, so a bug is not retried as if
 * the store were down.
 */
export const unavailable = (service: string) => <E>(cause: E): Named<E> =>
  (cause instanceof Bug || cause instanceof Conflict
    ? cause
    : new Unavailable({ service, message: cause instanceof Error ? cause.message : describe(cause) })) as Named<E>

/** What `unavailable` makes of a failure: a `Bug` or a `Conflict` kept, anything else an `Unavailable`. */
export type Named<E> = E extends Bug | Conflict ? E : Unavailable
