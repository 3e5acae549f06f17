/**
 * The message shapes of the five factline queues.
 *
 * Every queue carries envelopes (Envelope.ts). `factline-events` carries the
 * domain events and commands product teams register; the four platform queues
 * carry platform payloads adapted from the z0 queue spec: the fact itself for
 * projections and fact-processing, a delivery for webhooks, a work slice for batch.
 */
import * as Schema from "effect/Schema"
import { Envelope, IsoDateTime, PayloadRef } from "./Envelope.js"
import { Fact, FactType } from "./Fact.js"

export const QueueName = Schema.Literals([
  "factline-events",
  "factline-projections",
  "factline-fact-processing",
  "factline-webhooks",
  "factline-batch"
])
export type QueueName = typeof QueueName.Type

/** `factline-events`: a domain event or command; the payload is validated against the registry. */
export const EventMessage = Envelope
export type EventMessage = typeof EventMessage.Type

/**
 * `factline-projections` and `factline-fact-processing`, one fact per message
 * (a fact dead-lettered on its own, or too large to share a message).
 * `replayed` marks facts re-emitted by a rebuild: only projections consume them.
 */
export const FactPayload = Schema.Struct({
  fact: Fact,
  replayed: Schema.optional(Schema.Boolean)
})
export type FactPayload = typeof FactPayload.Type

/**
 * `factline-projections` and `factline-fact-processing`, the usual shape: the
 * facts one consumer batch relayed to one destination for one tenant, in one
 * message (split beyond the queue's message size). Consumers handle each fact
 * on its own; a fact that fails permanently is dead-lettered alone.
 */
export const FactBatchPayload = Schema.Struct({
  facts: Schema.Array(Fact).check(Schema.isMinLength(1)),
  replayed: Schema.optional(Schema.Boolean)
})
export type FactBatchPayload = typeof FactBatchPayload.Type

/**
 * `factline-webhooks`: one delivery of one fact to one endpoint (message type
 * `webhook.delivery`, idempotency key = `delivery_id`). Seed 001's fields
 * (`webhook_config_id`, `webhook_config_version`, `fact_id`, `fact_type`,
 * the pre-computed `payload`, `first_attempted_at`) plus what delivery needs:
 * the deterministic `delivery_id` (the `webhook-id` header on every attempt),
 * the catalog `event_type`, the triggering fact's stream and time. Facts of
 * published types also reach this queue as fact messages, to be fanned out.
 */
export const WebhookPayload = Schema.Struct({
  delivery_id: Schema.String,
  webhook_config_id: Schema.String,
  webhook_config_version: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
  fact_id: Schema.String,
  fact_type: FactType,
  fact_stream: Schema.String,
  event_type: Schema.String,
  occurred_at: IsoDateTime,
  payload: Schema.Unknown,
  first_attempted_at: Schema.optional(IsoDateTime)
})
export type WebhookPayload = typeof WebhookPayload.Type

/** `factline-batch`: one slice of a bulk operation; items inline or an R2 manifest. */
export const BatchPayload = Schema.Struct({
  batch_id: Schema.String,
  operation: Schema.Literals(["import", "export", "reconcile", "rebuild", "move", "delete_tenant", "erase", "reshard"]),
  items: Schema.optional(Schema.Array(Schema.Unknown)),
  items_ref: Schema.optional(PayloadRef),
  offset: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  total: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
})
export type BatchPayload = typeof BatchPayload.Type

/** The payload schema of each platform queue, keyed by queue (events use the registry instead). */
export const platformPayloads = {
  "factline-projections": Schema.Union([FactBatchPayload, FactPayload]),
  "factline-fact-processing": Schema.Union([FactBatchPayload, FactPayload]),
  "factline-webhooks": WebhookPayload,
  "factline-batch": BatchPayload
} as const
