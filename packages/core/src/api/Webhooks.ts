/**
 * The webhooks HTTP API (scope `admin`, within the token's tenant; the
 * catalog with any authenticated token):
 *
 * - `GET /v1/webhooks/event-types` — the catalog: event types, their fact type, a JSON Schema of each payload.
 * - `POST /v1/webhooks/endpoints` `{ url, event_types | fact_types, description? }` → 201 with the
 *   `whsec_…` secret — the only time it is shown.
 * - `GET /v1/webhooks/endpoints?limit=&cursor=` — a page of endpoints, oldest first; at most
 *   `FACTLINE_WEBHOOK_ENDPOINTS_PER_TENANT` (default 20) per tenant: one more is a 409.
 * - `GET /v1/webhooks/endpoints/:id`, `PATCH …/:id` (url, types, description, enabled, max_per_second,
 *   max_in_flight), `DELETE …/:id`.
 * - `POST …/:id/rotate-secret` → the new secret, once; the old one keeps signing for 24 h.
 * - `GET …/:id/attempts?limit=&cursor=` — the delivery log, newest first.
 * - `POST …/:id/recover` `{ since }` — re-sends every failed delivery since then.
 *
 * Another tenant's endpoint is the same 404 as a missing one. Secrets are
 * never logged and never returned after creation or rotation.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { IsoDateTime } from "@factline/schemas"
import { cursor, describe, Json, limitParameter, nextCursor, type PageLimit, problems } from "./Contract.js"
import { Edge } from "./Edge.js"
// An endpoint's limits (the runtime, core's `WebhookStore`, reads them from here).
/** The most event types an endpoint subscribes to. */
export const maxTypes = 100
/** The longest description of an endpoint. */
export const maxDescription = 1_000
/** The highest `max_per_second` and `max_in_flight` an endpoint may set. */
export const maxRateLimit = 1_000

export const Endpoint = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  description: Schema.NullOr(Schema.String),
  event_types: Schema.Array(Schema.String),
  enabled: Schema.Boolean,
  version: Schema.Int.annotate({ description: "Bumped by every change" }),
  disabled_reason: Schema.NullOr(Schema.String),
  failing_since: Schema.NullOr(Schema.String),
  previous_secret_expires_at: Schema.NullOr(Schema.String).annotate({ description: "While a rotated-out secret still signs beside the new one" }),
  max_per_second: Schema.NullOr(Schema.Int).annotate({ description: "At most this many deliveries started in any second, across isolates (null: no limit); over it, deliveries wait (never dropped, no attempt spent)" }),
  max_in_flight: Schema.NullOr(Schema.Int).annotate({ description: "At most this many deliveries in flight at once (null: no limit)" }),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "WebhookEndpoint", description: "A tenant's webhook endpoint; its secret is never shown again after creation or rotation" })
export const WithSecret = Schema.Struct({ ...Endpoint.fields, secret: Schema.String.annotate({ description: "`whsec_…`: shown this once" }) })
/** A list of catalog event types or of fact types: 1 to 100 names (each checked against the catalog by the store). */
const typeList = Schema.Array(Schema.String).check(Schema.isMinLength(1), Schema.isMaxLength(maxTypes))
/** A delivery limit: 1 to 1000, or null for none. */
const deliveryLimit = Schema.NullOr(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: maxRateLimit })))
/**
 * An endpoint's fields. The schema decides their shapes (a field it does not have is a 400 naming it); the store
 * decides what needs more: the URL's SSRF guard, each type against the catalog, one of `event_types` and
 * `fact_types` on create.
 */
export const EndpointInput = Schema.Struct({
  url: Schema.String.annotate({ description: "https only; private, loopback, link-local and metadata addresses are refused" }),
  event_types: Schema.optionalKey(typeList).annotate({ description: `Catalog event types (GET /v1/webhooks/event-types), 1 to ${maxTypes}` }),
  fact_types: Schema.optionalKey(typeList).annotate({ description: "Or the fact types they publish (each subscribes every event type published from it)" }),
  description: Schema.optionalKey(Schema.NullOr(Schema.String.check(Schema.isMaxLength(maxDescription)))).annotate({ description: `At most ${maxDescription.toLocaleString("en")} characters; null clears it` }),
  enabled: Schema.optionalKey(Schema.Boolean),
  max_per_second: Schema.optionalKey(deliveryLimit).annotate({ description: `Deliveries started per second at most, 1–${maxRateLimit} (null or absent: no limit)` }),
  max_in_flight: Schema.optionalKey(deliveryLimit).annotate({ description: `Deliveries in flight at most, 1–${maxRateLimit} (null or absent: no limit)` })
})
const id = { id: Schema.String.annotate({ description: "A webhook endpoint id" }) }
const admin = ["admin"] as const
const errors = {
  400: "`invalid_request`, naming each field (an unknown event type, a refused URL)",
  404: "`not_found`: no such endpoint for this tenant",
  415: "`unsupported_media_type`",
  503: "`unavailable`: the store, or the secrets key is not configured; retry"
}

export const eventTypes = HttpApiEndpoint.get("listEventTypes", "/v1/webhooks/event-types", {
  success: Schema.Struct({ data: Schema.Array(Schema.Struct({ type: Schema.String, fact_type: Schema.String, description: Schema.NullOr(Schema.String), schema: Json.annotate({ description: "JSON Schema (draft 2020-12) of the payload" }) })) })
}).pipe(describe({ summary: "The webhook event catalog", scopes: ["read", "admin"] }))

export const createEndpoint = HttpApiEndpoint.post("createEndpoint", "/v1/webhooks/endpoints", {
  payload: EndpointInput,
  success: WithSecret.pipe(HttpApiSchema.status(201)),
  error: problems(400, 409, 415, 503)
}).pipe(describe({
  summary: "Create a webhook endpoint",
  description: "Answers the signing secret once. A tenant has at most `FACTLINE_WEBHOOK_ENDPOINTS_PER_TENANT` endpoints (default 20), enabled or not.",
  scopes: admin,
  usage: 'send { "url": "https://…", "event_types": ["…"] } (or "fact_types")',
  errors: { 400: errors[400], 409: "`endpoint_limit`: the tenant has as many endpoints as the cap allows (named with the setting in `details`)", 415: errors[415], 503: errors[503] }
}))

/** A page of the webhook listings (endpoints, delivery attempts). */
export const listLimit: PageLimit = { maximum: 100, default: 50 }

export const listEndpoints = HttpApiEndpoint.get("listEndpoints", "/v1/webhooks/endpoints", {
  query: { limit: limitParameter(listLimit), cursor },
  success: Schema.Struct({ data: Schema.Array(Endpoint), next_cursor: nextCursor }),
  error: problems(400, 503)
}).pipe(describe({ summary: "List webhook endpoints", description: "Oldest first, a page at a time: pass `next_cursor` as `cursor` for the next.", scopes: admin, errors: { 400: "`invalid_query`: a limit out of range or a malformed cursor", 503: errors[503] } }))

export const getEndpoint = HttpApiEndpoint.get("getEndpoint", "/v1/webhooks/endpoints/:id", { params: id, success: Endpoint, error: problems(404, 503) })
  .pipe(describe({ summary: "Get a webhook endpoint", scopes: admin, errors: { 404: errors[404], 503: errors[503] } }))

export const changeUsage = "send the fields to change: url, event_types or fact_types, description, enabled, max_per_second, max_in_flight"

export const updateEndpoint = HttpApiEndpoint.patch("updateEndpoint", "/v1/webhooks/endpoints/:id", {
  params: id,
  payload: EndpointInput.mapFields((fields) => ({ ...fields, url: Schema.optional(fields.url) })),
  success: Endpoint,
  error: problems(400, 404, 415, 503)
}).pipe(describe({ summary: "Change a webhook endpoint", scopes: admin, usage: changeUsage, errors }))

export const deleteEndpoint = HttpApiEndpoint.delete("deleteEndpoint", "/v1/webhooks/endpoints/:id", { params: id, error: problems(404, 503) })
  .pipe(describe({ summary: "Delete a webhook endpoint", scopes: admin, errors: { 404: errors[404], 503: errors[503] } }))

export const rotateSecret = HttpApiEndpoint.post("rotateSecret", "/v1/webhooks/endpoints/:id/rotate-secret", { params: id, success: WithSecret, error: problems(404, 409, 503) })
  .pipe(describe({
    summary: "Rotate an endpoint's secret",
    description: "Answers the new secret once; the old one keeps signing beside it for 24 hours. Of concurrent rotations one wins; the others answer 409 and rotated nothing.",
    scopes: admin,
    errors: { 404: errors[404], 409: "`conflict`: the endpoint changed while rotating (a concurrent rotation or change); read it and rotate again", 503: errors[503] }
  }))

export const attempts = HttpApiEndpoint.get("listAttempts", "/v1/webhooks/endpoints/:id/attempts", {
  params: id,
  query: { limit: limitParameter(listLimit), cursor },
  success: Schema.Struct({ data: Schema.Array(Json), next_cursor: nextCursor }).annotate({ description: "The delivery log, newest first: delivery id, event type, attempt, status code, ≤ 1 KiB response snippet, duration, time; `throttled: true` for a delivery the endpoint's limits held back (nothing sent, no attempt spent, sent again after the delay its `error` names)" }),
  error: problems(400, 404, 503)
}).pipe(describe({ summary: "An endpoint's delivery attempts", scopes: admin, errors: { 400: "`invalid_query`", 404: errors[404], 503: errors[503] } }))

export const recover = HttpApiEndpoint.post("recoverEndpoint", "/v1/webhooks/endpoints/:id/recover", {
  params: id,
  payload: Schema.Struct({ since: IsoDateTime.annotate({ description: "ISO 8601 date-time (a real one: 2026-02-30 is refused)" }) }),
  success: Schema.Struct({ recovered: Schema.Int, since: Schema.String }).pipe(HttpApiSchema.status(202)),
  error: problems(400, 404, 409, 415, 503)
}).pipe(describe({
  summary: "Re-send failed deliveries",
  description: "Every delivery to this endpoint that failed since then is sent again (same webhook-id).",
  scopes: admin,
  usage: 'send { "since": "<ISO 8601 time>" }: failed deliveries since then are sent again',
  errors: { ...errors, 409: "`conflict`: the endpoint is disabled; enable it first" } }))

export const group = HttpApiGroup.make("webhooks").add(eventTypes, createEndpoint, listEndpoints, getEndpoint, updateEndpoint, deleteEndpoint, rotateSecret, attempts, recover)
  .middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Webhooks",
    description: "The event catalog and a tenant's endpoints: signed (Standard Webhooks), retried, recoverable deliveries."
  }))
