/**
 * A fact: an immutable record in a ledger stream.
 *
 * `fact_id` is deterministic from its cause (see core's FactId), `sequence` is
 * the position in its stream (1-based, gap-free). This module only describes the
 * shape; appending and ordering live in the ledger.
 */
import { Schema } from "effect"
import { IsoDateTime, TenantId } from "./Envelope.js"

export const FactType = Schema.String.check(
  Schema.isPattern(/^[a-z][a-z0-9_]*$/, { message: "must be a lower-case word, e.g. outcome" })
)

export const Fact = Schema.Struct({
  fact_id: Schema.String,
  tenant_id: TenantId,
  /** The stream the fact belongs to: the envelope's `subject`. */
  stream: Schema.String,
  sequence: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
  type: FactType,
  data: Schema.Record(Schema.String, Schema.Unknown),
  /** The idempotency key of the message, or the parent fact id, that caused this fact. */
  causation_id: Schema.String,
  correlation_id: Schema.String,
  /** The handler or processor that decided the fact. */
  caused_by: Schema.String,
  created_at: IsoDateTime
})
export type Fact = typeof Fact.Type
