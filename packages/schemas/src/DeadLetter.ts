/**
 * The dead-letter record: the original message, untouched, plus why it died.
 *
 * A DLQ consumer persists these; an operator replays the original message with
 * its original idempotency key. Records written by the platform itself (when a
 * consumer crashed past `max_retries`) carry the reason `platform_retries_exhausted`.
 */
import * as Schema from "effect/Schema"
import { IsoDateTime } from "./Envelope.js"

export const FailureReason = Schema.Literals([
  "decode_error",
  "unknown_message_type",
  "unsupported_version",
  "payload_missing",
  "idempotency_conflict",
  "permanent_failure",
  "retries_exhausted",
  "platform_retries_exhausted",
  /** A bug in product code (a throw, an `Effect.die`), after its short retry budget; its stack is in `stack`. */
  "defect"
])
export type FailureReason = typeof FailureReason.Type

export const Failure = Schema.Struct({
  reason: FailureReason,
  last_error: Schema.String,
  attempts: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
  first_attempted_at: IsoDateTime,
  last_attempted_at: IsoDateTime,
  queue: Schema.String,
  /** Where a defect came from: its stack (reason `defect`); absent otherwise. */
  stack: Schema.optional(Schema.String)
})
export type Failure = typeof Failure.Type

export const DeadLetterRecord = Schema.Struct({
  /** The message body exactly as it was received (it may not even be an envelope). */
  original_message: Schema.Unknown,
  failure: Failure
})
export type DeadLetterRecord = typeof DeadLetterRecord.Type
