/**
 * The two ways a handler can fail, as tagged values.
 *
 * Transient vs permanent is a property of the error type, decided here once and
 * read by the consumer runtime: a `TransientError` is retried with the queue's
 * backoff, a `PermanentError` goes to the dead-letter queue at once. A defect (a
 * thrown exception) is treated as transient: it is retried, then dead-lettered
 * with its message when retries run out.
 */
import { Schema } from "effect"

export class TransientError extends Schema.TaggedError<TransientError>()("TransientError", {
  message: Schema.String
}) {}

export class PermanentError extends Schema.TaggedError<PermanentError>()("PermanentError", {
  message: Schema.String
}) {}

export type HandlerError = TransientError | PermanentError
