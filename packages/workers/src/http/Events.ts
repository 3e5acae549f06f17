/**
 * `POST /v1/events`: ingest one envelope, a batch `{ "events": [...] }` (up to 1,000), or CloudEvents
 * (structured, batched or binary). The tenant comes from the token; every event is validated against its
 * registered message type before any is accepted, and accepted ones are deduplicated by idempotency key.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import type { Hono } from "hono"
import { Failure, Producer, type Registry } from "@factline/core"
import { Telemetry } from "@factline/core/runtime"
import { EnvelopeInput, Issues } from "@factline/schemas"
import * as CloudEvents from "./CloudEvents.js"
import { Forbidden } from "./Problem.js"
import { type AppEnv, bind, describe, Json, problems } from "./Contract.js"
import { isObject, readBody } from "./JsonBody.js"
import type { Run } from "./Run.js"
import * as Traceparent from "./Traceparent.js"

export const maxEventsPerRequest = 1_000

/** What `POST /v1/events` reads: JSON envelopes and the CloudEvents types. */
const eventContentTypes = ["application/json", "application/cloudevents+json", "application/cloudevents-batch+json"]

const Envelope = EnvelopeInput.annotate({
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
    traceparent: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-.*)?$/))).annotate({
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

export const group = HttpApiGroup.make("events").add(ingest)
  .annotateMerge(OpenApi.annotations({
    title: "Events",
    description: "Ingest typed domain events (JSON envelopes or CloudEvents); each is validated against its registered message type and deduplicated by idempotency key."
  }))

export const mount = (app: Hono<AppEnv>, deps: { readonly registry: Registry.Shape; readonly run: Run }) => {
  const { registry, run } = deps
  bind(app, ingest, async (c, reply) => {
    const principal = c.get("principal")
    const trace = Traceparent.ofRequest(c.req.raw.headers)
    if (!trace.ok) throw new Failure.InvalidInput({ message: trace.message, problems: trace.problems })
    const body = await readBody(c, eventContentTypes)

    const cloudEvents = CloudEvents.mode(c.req.header("content-type"), c.req.raw.headers)
    let batch: boolean
    let list: unknown
    if (cloudEvents) {
      let events = cloudEvents === "batch" ? body : [body]
      if (cloudEvents === "binary") {
        const binary = CloudEvents.fromBinary(c.req.raw.headers, body)
        if (binary.problems.length > 0) {
          throw new Failure.InvalidInput({ code: "invalid_events", message: `${binary.problems.length} CloudEvents header(s) refused; nothing was accepted`, problems: binary.problems })
        }
        events = [binary.event]
      }
      if (!Array.isArray(events) || events.length === 0) throw new Failure.InvalidInput({ message: "a CloudEvents batch must be a non-empty JSON array" })
      batch = cloudEvents === "batch"
      const mapped = events.map((event) => CloudEvents.toEnvelope(event, registry.definitions))
      const problems = mapped.flatMap((m, i) => m.problems.map((p) => ({ ...p, path: [batch ? `events.${i}` : "", p.path].filter(Boolean).join(".") })))
      if (problems.length > 0) throw new Failure.InvalidInput({ code: "invalid_events", message: `${Issues.summary(problems.length)}; nothing was accepted`, problems: problems })
      list = mapped.map((m) => m.input)
    } else {
      if (!isObject(body)) throw new Failure.InvalidInput({ message: 'send one envelope object or { "events": [...] }' })
      batch = "events" in body
      list = batch ? body.events : [body]
    }
    if (!Array.isArray(list) || list.length === 0) throw new Failure.InvalidInput({ message: '"events" must be a non-empty array' })
    if (list.length > maxEventsPerRequest) {
      throw new Failure.InvalidInput({ code: "too_many_events", message: `at most ${maxEventsPerRequest} events per request; got ${list.length}` })
    }
    // Tenant comes from the token: defaulted when absent, refused when it names another tenant.
    const foreign: Array<{ path: string; message: string }> = []
    const inputs = list.map((event, index) => {
      if (!isObject(event)) return event
      if (event.tenant_id !== undefined && event.tenant_id !== principal.tenantId) {
        foreign.push({ path: batch ? `events.${index}.tenant_id` : "tenant_id", message: "this token cannot write events for another tenant" })
      }
      return { tenant_id: principal.tenantId, source: "http", traceparent: trace.traceparent, ...event }
    })
    if (foreign.length > 0) throw new Forbidden({ message: "events for another tenant", problems: foreign })

    // Exporting spans (Telemetry), the request is a span in its trace: the header's, or the one it started.
    const items = await run(c.env, Effect.flatMap(Effect.service(Producer.Producer), (p) => p.accept(inputs, { pathPrefix: batch ? "events" : undefined })).pipe(
      Telemetry.continuing("POST /v1/events", () => [trace.traceparent], { kind: "server", attributes: { "http.request.method": "POST", "http.route": "/v1/events", "factline.tenant_id": principal.tenantId, "factline.events": list.length } })
    ))
    const replay = items.every((item) => item.duplicate)
    return reply({
        accepted: items.length,
        idempotency_keys: items.map((item) => item.envelope.idempotency_key),
        items: items.map((item) => ({ idempotency_key: item.envelope.idempotency_key, duplicate: item.duplicate }))
      }, { ...Traceparent.responseHeaders(trace.traceparent, items), ...(replay ? { "idempotent-replay": "true" } : {}) })
  })

}
