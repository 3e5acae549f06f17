/**
 * `POST /v1/events`: ingest one envelope, a batch `{ "events": [...] }` (up to 1,000), or CloudEvents
 * (structured, batched or binary). The tenant comes from the token; every event is validated against its
 * registered message type before any is accepted, and accepted ones are deduplicated by idempotency key.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { EnvelopeInput, TraceContext } from "@factline/schemas"
import { describe, Json, problems } from "./Contract.js"
import { Edge } from "./Edge.js"

export const maxEventsPerRequest = 1_000

/**
 * An event as a client sends it: the producer's `EnvelopeInput` with `tenant_id` (the token's) and `source`
 * (`http`) left to the API — what the handler accepts, so the client derived from this description (and
 * the typed client's own check before sending) takes an event without them.
 */
export const Envelope = EnvelopeInput.mapFields((fields) => ({
  ...fields,
  tenant_id: Schema.optional(fields.tenant_id),
  source: Schema.optional(fields.source)
}), { unsafePreserveChecks: true }).annotate({
  identifier: "EnvelopeInput",
  description: "An event: `tenant_id` defaults to the token's (another tenant's is a 403), `source` to `http`; `message_id`, `correlation_id` and `created_at` are filled when absent. The payload is validated against the registered `message_type` at `schema_version`."
})

const Accepted = Schema.Struct({
  accepted: Schema.Int,
  idempotency_keys: Schema.Array(Schema.String),
  items: Schema.Array(Schema.Struct({ idempotency_key: Schema.String, duplicate: Schema.Boolean.annotate({ description: "already accepted earlier under this key with this payload: not sent again" }) }))
}).annotate({ identifier: "Accepted" })

const CloudEvent = Schema.Struct({
  specversion: Schema.Literal("1.0"),
  id: Schema.String,
  source: Schema.String,
  type: Schema.String.annotate({ description: "a registered message type, optionally with `.v<N>` for its schema version" }),
  subject: Schema.String,
  time: Schema.optional(Schema.String),
  dataschema: Schema.optional(Schema.String),
  data: Json
}).annotate({ identifier: "CloudEvent", description: "A CloudEvents 1.0 event; the `id` is its idempotency key" })

export const ingest = HttpApiEndpoint.post("ingest", "/v1/events", {
  headers: {
    traceparent: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-.*)?$/, { message: TraceContext.formatMessage }))).annotate({
      description: "W3C Trace Context: the trace of every event without its own; absent, the request starts a new trace (returned in the 202's traceparent header)"
    })
  },
  payload: [
    Schema.Union([Envelope, Schema.Struct({ events: Schema.Array(Envelope).check(Schema.isMinLength(1), Schema.isMaxLength(maxEventsPerRequest)) })]),
    CloudEvent.pipe(HttpApiSchema.asJson({ contentType: "application/cloudevents+json" })),
    Schema.Array(CloudEvent).pipe(HttpApiSchema.asJson({ contentType: "application/cloudevents-batch+json" }))
  ],
  success: Accepted.pipe(HttpApiSchema.status(202)),
  error: problems(400, 403, 413, 415, 422, 503)
}).pipe(describe({
  summary: "Ingest events",
  description: "Accepts one envelope or `{ \"events\": [...] }` (1 to 1,000), or CloudEvents in structured, batch or binary mode. All or nothing: one invalid event and nothing is accepted. Sending again is safe: an idempotency key already accepted with the same payload is a duplicate, answered 202 with `idempotent-replay: true` when every item is one. A W3C `traceparent` header is the trace of every event without its own (`traceparent` field or CloudEvents attribute); without one the request starts a new trace; the 202 returns the request's trace in a `traceparent` header. A delayed send: `delay_seconds` (0 to 43,200, Cloudflare Queues' 12 hours; CloudEvents extension `delayseconds`) is turned once into the envelope's `deliver_after` (`created_at` + the delay, never later than now + the delay), so a resend of the same body keeps its time and no retry or replay restarts it.",
  scopes: ["events:write"],
  errors: {
    400: "`invalid_events` (one `problems` entry per field, `events.<i>.<field>`; also a `delay_seconds` outside 0..43,200 or a `deliver_after` more than 12 hours ahead), `invalid_request` (also an invalid `traceparent` header, `headers.traceparent`), `too_many_events`, `too_deep`, or a body that is not JSON",
    403: "`forbidden`: an event names another tenant",
    413: "`payload_too_large`: the body exceeds 5 MiB",
    415: "`unsupported_media_type`: not JSON or CloudEvents",
    422: "`idempotency_conflict`: a key already accepted with another payload",
    503: "`unavailable`: the queue or a store is down; retry (by idempotency key, safely)"
  }
}))

export const group = HttpApiGroup.make("events").add(ingest).middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Events",
    description: "Ingest typed domain events (JSON envelopes or CloudEvents); each is validated against its registered message type and deduplicated by idempotency key."
  }))
