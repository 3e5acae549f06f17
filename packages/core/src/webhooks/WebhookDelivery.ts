/**
 * The messages of the webhooks queue and the delivery message's parts: a fact message's items and a delivery's
 * (what the consumer decodes), the delivery id (deterministic: fact id + endpoint id), the body every attempt of
 * a delivery sends, and the delivery message itself — built by the fan-out for a fact and by the platform's alerts
 * (operations/Alerts.ts) for an alert. Pure but for the id's digest; sends nothing.
 */
import { type Envelope, type Fact, TraceContext, type WebhookPayload } from "@factline/schemas"
import type { EndpointConfig } from "./WebhookStore.js"

export const deliveryMessageType = "webhook.delivery"
export const source = "factline-webhooks"
/** A delivery message must fit a queue message with room to spare. */
export const maxDeliveryBytes = 100 * 1024

/** A message's item: a fact to fan out, or a delivery to attempt (`attempts` and `last` are the queue's). */
export type Item =
  | { readonly kind: "fact"; readonly fact: Fact; readonly replayed: boolean }
  | { readonly kind: "delivery"; readonly envelope: Envelope; readonly payload: WebhookPayload; readonly attempts: number; readonly last: boolean }

/** A delivery item under its key. */
export type DeliveryItem = { readonly key: string; readonly value: Extract<Item, { kind: "delivery" }> }

export const isDelivery = (body: unknown) =>
  typeof body === "object" && body !== null && (body as { message_type?: unknown }).message_type === deliveryMessageType

const hex = (bytes: ArrayBuffer) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("")

/** The delivery id of a fact to an endpoint: deterministic, so every attempt and every fan-out agree. */
export const deliveryId = async (factId: string, endpointId: string) =>
  `wd_${hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${factId}\u0000${endpointId}`))).slice(0, 32)}`

/** The body every attempt of a delivery sends (fixed: the fact's time, not the attempt's). */
export const body = (payload: WebhookPayload) => JSON.stringify({ type: payload.event_type, timestamp: payload.occurred_at, data: payload.payload })

/**
 * The delivery message of one event to one endpoint: what the fan-out sends for a fact, and what the platform's
 * alerts (operations/Alerts.ts) send for an alert — the delivery id (`webhook-id`) derived from the fact's id.
 */
export const deliveryMessage = async (input: {
  readonly fact: Pick<Fact, "fact_id" | "type" | "stream" | "tenant_id" | "correlation_id" | "created_at" | "traceparent">
  readonly endpoint: Pick<EndpointConfig, "id" | "version">
  readonly eventType: string
  readonly data: unknown
  readonly now: string
  /** Telemetry.sender: the fanning-out span as the delivery's parent when exported. */
  readonly sender?: (traceparent: string | undefined) => string | undefined
}): Promise<Envelope> => {
  const { fact, endpoint } = input
  const id = await deliveryId(fact.fact_id, endpoint.id)
  const payload: WebhookPayload = {
    delivery_id: id,
    webhook_config_id: endpoint.id,
    webhook_config_version: endpoint.version,
    fact_id: fact.fact_id,
    fact_type: fact.type,
    fact_stream: fact.stream,
    event_type: input.eventType,
    occurred_at: fact.created_at,
    payload: input.data
  }
  return {
    schema_version: 1,
    message_type: deliveryMessageType,
    message_id: `msg_${id}`,
    idempotency_key: id,
    correlation_id: fact.correlation_id,
    causation_id: fact.fact_id,
    tenant_id: fact.tenant_id,
    subject: endpoint.id,
    source,
    created_at: input.now,
    payload,
    traceparent: input.sender?.(fact.traceparent) ?? TraceContext.child(fact.traceparent)
  }
}

/**
 * Whether the endpoint existed when the fact was appended (its `created_at`, the time it was decided and
 * appended): only those receive it. A fact relayed again later — `POST /v1/recover`, an outbox's late relay —
 * is not delivered to endpoints created since, which never subscribed to it.
 */
export const existedAt = (endpoint: Pick<EndpointConfig, "created_at">, fact: Pick<Fact, "created_at">) =>
  Date.parse(endpoint.created_at) <= Date.parse(fact.created_at)
