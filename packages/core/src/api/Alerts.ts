/**
 * Operator alerts (scope `platform` only: alerts are about every tenant, and no tenant sees them) — core's
 * `Alerts`:
 *
 * - `POST /v1/alerts/endpoints` `{ url, event_types, description? }` → 201 with the `whsec_…` secret, once;
 *   `event_types` among `factline.health.changed`, `factline.dead_letter.opened` and `factline.workflow.failed`.
 * - `GET /v1/alerts/endpoints`, `GET|PATCH|DELETE /v1/alerts/endpoints/:id`,
 *   `POST …/:id/rotate-secret`, `GET …/:id/attempts` — as the tenants' webhook endpoints.
 * - `GET /v1/alerts` — each alert key's state: the level graded, the level last announced, when.
 * - `POST /v1/alerts/evaluate` — an evaluation now (the cron runs one every 5 minutes).
 *
 * The endpoints are webhook endpoints of the reserved alert tenant: deliveries are signed (Standard
 * Webhooks), SSRF-guarded and retried like every delivery.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { cursor, describe, Json, limitParameter, nextCursor, problems } from "./Contract.js"
import { Edge } from "./Edge.js"
import { Endpoint, EndpointInput, listLimit, WithSecret } from "./Webhooks.js"
/** The alert event types (the runtime, core's `Alerts`, reads them from here). */
export const eventTypes = {
  healthChanged: "factline.health.changed",
  deadLettersOpened: "factline.dead_letter.opened",
  workflowFailed: "factline.workflow.failed"
} as const

const eventTypeList = Object.values(eventTypes).map((t) => `\`${t}\``).join(", ")
const AlertEndpointInput = Schema.Struct({
  url: Schema.String.annotate({ description: "https only; private, loopback, link-local and metadata addresses are refused" }),
  event_types: Schema.Array(Schema.String).annotate({ description: `Alert event types: ${eventTypeList}` }),
  description: Schema.optional(Schema.String),
  enabled: Schema.optional(Schema.Boolean),
  // An alert endpoint is a webhook endpoint: the same delivery limits.
  max_per_second: EndpointInput.fields.max_per_second,
  max_in_flight: EndpointInput.fields.max_in_flight
})
const id = { id: Schema.String.annotate({ description: "An alert endpoint id" }) }
const platform = ["platform"] as const
const errors = {
  400: "`invalid_request`, naming each field (an unknown alert event type, a refused URL)",
  404: "`not_found`: no such alert endpoint",
  415: "`unsupported_media_type`",
  503: "`unavailable`: the store, or the secrets key is not configured; retry"
}
const State = Schema.Struct({
  key: Schema.String.annotate({ description: "`health:<queue>` (one per platform queue), `health:ledger` (a pending relay), `dead_letters` or `workflows_failed`" }),
  state: Schema.String.annotate({ description: "health: the level last graded (ok, warning, critical)" }),
  changed_at: Schema.String.annotate({ description: "When the graded level last changed" }),
  announced: Schema.NullOr(Schema.String).annotate({ description: "health: the level the last alert announced" }),
  announced_at: Schema.NullOr(Schema.String).annotate({ description: "When the last alert of this key was decided (the quiet period runs from here)" }),
  alerts: Schema.Int.annotate({ description: "Alerts of this key decided so far" }),
  pending: Schema.Boolean.annotate({ description: "An alert is being handed to the webhooks queue" })
})
const Sent = Schema.Struct({ key: Schema.String, alert_id: Schema.String, event_type: Schema.String, endpoints: Schema.Int.annotate({ description: "Endpoints it was sent to" }) })

export const createEndpoint = HttpApiEndpoint.post("createAlertEndpoint", "/v1/alerts/endpoints", {
  payload: AlertEndpointInput,
  success: WithSecret.pipe(HttpApiSchema.status(201)),
  error: problems(400, 409, 415, 503)
}).pipe(describe({
  summary: "Create an alert endpoint",
  description: `Answers the signing secret once. Alerts are delivered like webhooks (Standard Webhooks signatures, retries); their types: ${eventTypeList}.`,
  scopes: platform,
  usage: `send { "url": "https://…", "event_types": [${Object.values(eventTypes).map((t) => `"${t}"`).join(", ")}] }`,
  errors: { 400: errors[400], 409: "`endpoint_limit`: as many alert endpoints as `FACTLINE_WEBHOOK_ENDPOINTS_PER_TENANT` allows", 415: errors[415], 503: errors[503] }
}))

export const listEndpoints = HttpApiEndpoint.get("listAlertEndpoints", "/v1/alerts/endpoints", {
  query: { limit: limitParameter(listLimit), cursor },
  success: Schema.Struct({ data: Schema.Array(Endpoint), next_cursor: nextCursor }),
  error: problems(400, 503)
}).pipe(describe({ summary: "List alert endpoints", description: "Oldest first, a page at a time.", scopes: platform, errors: { 400: "`invalid_query`: a limit out of range or a malformed cursor", 503: errors[503] } }))

export const getEndpoint = HttpApiEndpoint.get("getAlertEndpoint", "/v1/alerts/endpoints/:id", { params: id, success: Endpoint, error: problems(404, 503) })
  .pipe(describe({ summary: "Get an alert endpoint", scopes: platform, errors: { 404: errors[404], 503: errors[503] } }))

export const updateEndpoint = HttpApiEndpoint.patch("updateAlertEndpoint", "/v1/alerts/endpoints/:id", {
  params: id,
  payload: AlertEndpointInput.mapFields((fields) => ({ ...fields, url: Schema.optional(fields.url), event_types: Schema.optional(fields.event_types) })),
  success: Endpoint,
  error: problems(400, 404, 415, 503)
}).pipe(describe({ summary: "Change an alert endpoint", scopes: platform, usage: "send the fields to change: url, event_types, description, enabled", errors }))

export const deleteEndpoint = HttpApiEndpoint.delete("deleteAlertEndpoint", "/v1/alerts/endpoints/:id", { params: id, error: problems(404, 503) })
  .pipe(describe({ summary: "Delete an alert endpoint", scopes: platform, errors: { 404: errors[404], 503: errors[503] } }))

export const rotateSecret = HttpApiEndpoint.post("rotateAlertSecret", "/v1/alerts/endpoints/:id/rotate-secret", { params: id, success: WithSecret, error: problems(404, 409, 503) })
  .pipe(describe({
    summary: "Rotate an alert endpoint's secret",
    description: "Answers the new secret once; the old one keeps signing beside it for 24 hours.",
    scopes: platform,
    errors: { 404: errors[404], 409: "`conflict`: the endpoint changed while rotating; read it and rotate again", 503: errors[503] }
  }))

export const attempts = HttpApiEndpoint.get("listAlertAttempts", "/v1/alerts/endpoints/:id/attempts", {
  params: id,
  query: { limit: limitParameter(listLimit), cursor },
  success: Schema.Struct({ data: Schema.Array(Json), next_cursor: nextCursor }).annotate({ description: "The delivery log, newest first" }),
  error: problems(400, 404, 503)
}).pipe(describe({ summary: "An alert endpoint's delivery attempts", scopes: platform, errors: { 400: "`invalid_query`", 404: errors[404], 503: errors[503] } }))

export const state = HttpApiEndpoint.get("alertState", "/v1/alerts", {
  success: Schema.Struct({ quiet_period_minutes: Schema.Number, window_minutes: Schema.Int, data: Schema.Array(State) }),
  error: problems(503)
}).pipe(describe({ summary: "Alert state", description: "Per alert key (`health:<queue>` for each queue, `health:ledger`, `dead_letters`, `workflows_failed`): what was graded and what was last announced.", scopes: platform, errors: { 503: "`unavailable`: the alert state; retry" } }))

export const evaluate = HttpApiEndpoint.post("evaluateAlerts", "/v1/alerts/evaluate", {
  success: Schema.Struct({ sent: Schema.Array(Sent) }),
  error: problems(503)
}).pipe(describe({
  summary: "Evaluate the alerts now",
  description: "What the cron does every 5 minutes: grades health, claims new dead letters and newly failed workflow instances, sends an alert for each change (de-duplicated; the quiet period applies).",
  scopes: platform,
  errors: { 503: "`unavailable`: a store or the webhooks queue; retry" }
}))

export const group = HttpApiGroup.make("alerts").add(state, evaluate, createEndpoint, listEndpoints, getEndpoint, updateEndpoint, deleteEndpoint, rotateSecret, attempts).middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Alerts",
    description: "The platform operators' alerts: health level changes, new dead letters and failed workflow instances, delivered as signed webhooks to their endpoints."
  }))
