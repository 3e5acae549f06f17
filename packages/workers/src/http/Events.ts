/**
 * The handler of `POST /v1/events`, implemented against its description (`@factline/core/api`'s `Events`: one
 * envelope, a batch `{ "events": [...] }` of up to 1,000, or CloudEvents — structured, batched or binary). The
 * tenant comes from the token; every event is validated against its registered message type before any is
 * accepted, and accepted ones are deduplicated by idempotency key.
 */
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import type * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import { Failure, Producer, Registry } from "@factline/core"
import { Events as Description } from "@factline/core/api"
import { Telemetry } from "@factline/core/runtime"
import { Issues } from "@factline/schemas"
import * as CloudEvents from "./CloudEvents.js"
import { apiOf, Caller, RequestBody } from "./Edge.js"
import { Forbidden } from "./Problem.js"
import * as Traceparent from "./Traceparent.js"

export const { maxEventsPerRequest } = Description

/** What `accept` reads of a body, once its mode is known: the envelope inputs, and whether they came as a batch. */
interface Inputs {
  readonly list: unknown
  readonly batch: boolean
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** The envelope inputs of a CloudEvents body (structured, batch or binary), or the problems naming each attribute at fault. */
const fromCloudEvents = (mode: CloudEvents.Mode, request: Request, body: unknown, registry: Registry.Shape): Effect.Effect<Inputs, Failure.InvalidInput> =>
  Effect.gen(function*() {
    let events = mode === "batch" ? body : [body]
    if (mode === "binary") {
      const binary = CloudEvents.fromBinary(request.headers, body)
      if (binary.problems.length > 0) {
        return yield* new Failure.InvalidInput({ code: "invalid_events", message: `${binary.problems.length} CloudEvents header(s) refused; nothing was accepted`, problems: binary.problems })
      }
      events = [binary.event]
    }
    if (!Array.isArray(events) || events.length === 0) return yield* new Failure.InvalidInput({ message: "a CloudEvents batch must be a non-empty JSON array" })
    const batch = mode === "batch"
    const mapped = events.map((event) => CloudEvents.toEnvelope(event, registry.definitions))
    const problems = mapped.flatMap((m, i) => m.problems.map((p) => ({ ...p, path: [batch ? `events.${i}` : "", p.path].filter(Boolean).join(".") })))
    if (problems.length > 0) return yield* new Failure.InvalidInput({ code: "invalid_events", message: `${Issues.summary(problems.length)}; nothing was accepted`, problems })
    return { list: mapped.map((m) => m.input), batch }
  })

/**
 * `POST /v1/events`, a raw handler of its endpoint (the description cannot say CloudEvents' binary mode, whose
 * attributes are headers, nor the all-or-nothing problems per event the registry's schemas name): the edge has
 * authenticated the caller and read the body within the JSON limits; the events are checked here and accepted by
 * core's `Producer` — every one valid, or none.
 */
const accept = (request: Request) =>
  Effect.gen(function*() {
    const caller = yield* Caller
    const trace = Traceparent.ofRequest(request.headers)
    if (!trace.ok) return yield* new Failure.InvalidInput({ message: trace.message, problems: trace.problems })
    const body = yield* RequestBody
    const mode = CloudEvents.mode(request.headers.get("content-type") ?? undefined, request.headers)
    let inputs: Inputs
    if (mode !== undefined) inputs = yield* fromCloudEvents(mode, request, body, yield* Registry.Registry)
    else if (!isObject(body)) return yield* new Failure.InvalidInput({ message: 'send one envelope object or { "events": [...] }' })
    else inputs = { batch: "events" in body, list: "events" in body ? body.events : [body] }
    const { list, batch } = inputs
    if (!Array.isArray(list) || list.length === 0) return yield* new Failure.InvalidInput({ message: '"events" must be a non-empty array' })
    if (list.length > Description.maxEventsPerRequest) {
      return yield* new Failure.InvalidInput({ code: "too_many_events", message: `at most ${Description.maxEventsPerRequest} events per request; got ${list.length}` })
    }
    // Tenant comes from the token: defaulted when absent, refused when it names another tenant.
    const foreign: Array<{ path: string; message: string }> = []
    const envelopes = list.map((event, index) => {
      if (!isObject(event)) return event
      if (event.tenant_id !== undefined && event.tenant_id !== caller.tenantId) {
        foreign.push({ path: batch ? `events.${index}.tenant_id` : "tenant_id", message: "this token cannot write events for another tenant" })
      }
      return { tenant_id: caller.tenantId, source: "http", traceparent: trace.traceparent, ...event }
    })
    if (foreign.length > 0) return yield* new Forbidden({ message: "events for another tenant", problems: foreign })

    // Exporting spans (Telemetry), the request is a span in its trace: the header's, or the one it started.
    const items = yield* Effect.flatMap(Producer.Producer, (p) => p.accept(envelopes, { pathPrefix: batch ? "events" : undefined })).pipe(
      Telemetry.continuing("POST /v1/events", () => [trace.traceparent], { kind: "server", attributes: { "http.request.method": "POST", "http.route": "/v1/events", "factline.tenant_id": caller.tenantId, "factline.events": list.length } })
    )
    const accepted: HttpApiEndpoint.Success<typeof Description.ingest>["Type"] = {
      accepted: items.length,
      idempotency_keys: items.map((item) => item.envelope.idempotency_key),
      items: items.map((item) => ({ idempotency_key: item.envelope.idempotency_key, duplicate: item.duplicate }))
    }
    const replay = items.every((item) => item.duplicate)
    return HttpServerResponse.jsonUnsafe(accepted, { status: 202, headers: { ...Traceparent.responseHeaders(trace.traceparent, items), ...(replay ? { "idempotent-replay": "true" } : {}) } })
  })

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "events", (handlers) => handlers.handleRaw("ingest", ({ request }) => accept(request.source as Request)))
