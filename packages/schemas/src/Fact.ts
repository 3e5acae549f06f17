/**
 * A fact: an immutable record in a ledger stream.
 *
 * `fact_id` is deterministic from its cause (see core's FactId), `sequence` is
 * the position in its stream (1-based, gap-free). This module only describes the
 * shape; appending and ordering live in the ledger.
 */
import * as Schema from "effect/Schema"
import { IsoDateTime, TenantId } from "./Envelope.js"
import { Traceparent } from "./TraceContext.js"

/** The registry's naming rule (core's `Naming`): lower-case words joined by `_`, `-` or `.`, at most 64 characters. */
export const FactType = Schema.String.check(
  Schema.isMaxLength(64),
  Schema.isPattern(/^[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$/, { message: "must be lower-case words joined by '_', '-' or '.', e.g. dispute_rejected" })
)

export const Fact = Schema.Struct({
  fact_id: Schema.String,
  tenant_id: TenantId,
  /** The stream the fact belongs to: the envelope's `subject`. */
  stream: Schema.String,
  sequence: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
  type: FactType,
  data: Schema.Record(Schema.String, Schema.Unknown),
  /**
   * The version of its type's data schema `data` is written at (its definition's `.version(n, …)`); absent on
   * facts stored before fact versions, which are version 1. Readers in the code see the latest version: the
   * runtime upcasts older data (and refuses a version newer than the code) before any product code sees it.
   */
  schema_version: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  /** The idempotency key of the message, or the parent fact id, that caused this fact. */
  causation_id: Schema.String,
  correlation_id: Schema.String,
  /** The handler or processor that decided the fact. */
  caused_by: Schema.String,
  created_at: IsoDateTime,
  /**
   * W3C trace context: the trace of the message that caused it, with the parent-id of the step that appended
   * it (a handler's decision, a processor, a webhook attempt). Absent on facts stored before trace context.
   */
  traceparent: Schema.optional(Traceparent)
})
export type Fact = typeof Fact.Type
