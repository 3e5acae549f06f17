/**
 * The client's failures: one tagged class per kind (Effect's `Schema.TaggedError`), so a caller tells them
 * apart with `instanceof` or `_tag` — never by reading a message. Each carries a `message` written for a
 * person, and the data to act on (the problems, by field; the status; the attempts made).
 *
 * Which failures are retried is decided once, in the Transport (429, 5xx, network): what reaches a caller
 * here is final for that call.
 */
import * as Schema from "effect/Schema"
import { Issues } from "@factline/schemas"

/** One problem with one field; `path` is dotted, relative to the event's envelope (`payload.duration_s`, `subject`). */
export const Problem = Issues.Problem
export type Problem = Issues.Problem

/** What an error read from the API's answer carries: its status, and its JSON body (the API's `Problem`) when it had one. */
const answered = { message: Schema.String, status: Schema.Number, body: Schema.optional(Schema.Unknown) }

/**
 * The payload (or an envelope field from the options) failed the message definition's schema in this
 * process: nothing was sent.
 */
export class InvalidPayload extends Schema.TaggedError<InvalidPayload>()("InvalidPayload", {
  message: Schema.String,
  message_type: Schema.String,
  idempotency_key: Schema.String,
  problems: Schema.Array(Problem)
}) {}

/**
 * The API refused this event (400, `invalid_events` or another `code`): its problems, paths relative to its
 * envelope. The platform accepted none of that request's events; the client sent the batch's other events
 * again without the refused ones, so only the emits named by a problem fail.
 */
export class InvalidEvents extends Schema.TaggedError<InvalidEvents>()("InvalidEvents", {
  message: Schema.String,
  code: Schema.String,
  idempotency_key: Schema.String,
  problems: Schema.Array(Problem)
}) {}

/**
 * The idempotency key was accepted before with another payload (`accepted_before`), or two emits of one
 * batch used it with different payloads (`within_request`): 422, nothing of this emit was accepted.
 */
export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>()("IdempotencyConflict", {
  message: Schema.String,
  idempotency_key: Schema.String,
  reason: Schema.String
}) {}

/** 401: the token is missing or unknown. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", answered) {}

/** 403: the token lacks the scope (`events:write` to emit, `read` to read), or the data is another tenant's. */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", answered) {}

/** 404: no such stream, projection, dead letter or batch job for this token's tenant. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", answered) {}

/** 400 on a read: a filter on a column that is not queryable, a malformed cursor, a limit out of range. */
export class InvalidQuery extends Schema.TaggedError<InvalidQuery>()("InvalidQuery", { ...answered, problems: Schema.Array(Problem) }) {}

/** 400 on a write other than an emit: a body the API refuses (a skip without its reason), naming each field. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", { ...answered, problems: Schema.Array(Problem) }) {}

/** 409: the record's state does not allow it (a dead letter replayed already, a batch job that has ended). */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", answered) {}

/**
 * Every attempt failed with a retryable answer (429, 5xx) or no answer at all (network error, timeout).
 * For an emit the outcome is unknown — it may have been accepted — and emitting it again with the same
 * idempotency key is safe.
 */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  message: Schema.String,
  attempts: Schema.Number,
  /** The last attempt's failure, in a few words (`fetch failed (ECONNREFUSED)`, `503 the ledger is unavailable`). */
  last: Schema.String,
  /** The last answer's status and body; undefined when the last attempt got none. */
  status: Schema.optional(Schema.Number),
  body: Schema.optional(Schema.Unknown)
}) {}

/** An answer the client does not expect (another status, or a body it cannot read): a wrong `baseUrl`, an API of another version. */
export class UnexpectedResponse extends Schema.TaggedError<UnexpectedResponse>()("UnexpectedResponse", { ...answered, code: Schema.optional(Schema.String) }) {}

/** How an emit fails. */
export type EmitError = InvalidPayload | InvalidEvents | IdempotencyConflict | Unauthorized | Forbidden | Unavailable | UnexpectedResponse
/** How a call of any other route fails (a read is one). */
export type RequestError = InvalidQuery | InvalidRequest | NotFound | Conflict | Unauthorized | Forbidden | Unavailable | UnexpectedResponse
/** How a read fails. */
export type ReadError = RequestError
export type ClientError = EmitError | RequestError
