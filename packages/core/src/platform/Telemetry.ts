/**
 * Traces that leave the Worker: the platform's spans (every `Effect.fn` step, one span per HTTP request that
 * accepts events, one per queue batch, one per webhook POST) exported over OTLP/HTTP (JSON) to the collector
 * `FACTLINE_OTLP_ENDPOINT` names, with `FACTLINE_OTLP_HEADERS` (a secret: `key=value,key2=value2`, as
 * `OTEL_EXPORTER_OTLP_HEADERS`) on every export and `FACTLINE_OTLP_SERVICE_NAME` (default `factline`) as the
 * resource's `service.name`. The spans continue the W3C trace context every event, fact and delivery carries
 * (TraceContext): a batch's span is a child of its first message's `traceparent` and links the others', so one
 * trace runs from `POST /v1/events` through every queue hop to the projection write and the webhook POST.
 *
 * Off by default: without an endpoint there is no exporter, no tracer change and no span added (`exporting`
 * is false and every combinator here returns its effect unchanged). The exporter buffers ended spans in the
 * isolate; the Worker flushes them (`flush`) with `ctx.waitUntil` at the end of each invocation — a Worker has
 * no background time for an interval to run in.
 *
 * It does not export metrics or logs (factline's metrics are its own D1 rollup and Analytics Engine points,
 * not Effect `Metric`s), does not propagate `tracestate`, and never logs the headers.
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Tracer from "effect/Tracer"
import { TraceContext } from "@factline/schemas"
import * as OtlpExport from "./OtlpExport.js"

export { Flusher } from "./OtlpExport.js"

export const endpointVariable = "FACTLINE_OTLP_ENDPOINT"
export const headersVariable = "FACTLINE_OTLP_HEADERS"
export const serviceNameVariable = "FACTLINE_OTLP_SERVICE_NAME"
export const resourceAttributesVariable = "OTEL_RESOURCE_ATTRIBUTES"

export interface Shape {
  /** Where spans are POSTed (`<endpoint>/v1/traces`); undefined: export is off. */
  readonly tracesUrl: string | undefined
  /** Sent with every export (an API key, most often): never logged. */
  readonly headers: Redacted.Redacted<Readonly<Record<string, string>>>
  readonly serviceName: string
  /** The standard `OTEL_RESOURCE_ATTRIBUTES` (`key=value,…`, URL-encoded values), added to the resource. */
  readonly resourceAttributes: Readonly<Record<string, string>>
}

/**
 * The traces URL of `FACTLINE_OTLP_ENDPOINT`: a base URL (`https://otlp.example.com`, `…/otlp`) gets
 * `/v1/traces`, as `OTEL_EXPORTER_OTLP_ENDPOINT` does; one already ending in `/v1/traces` is kept. Anything but
 * an http(s) URL is an error (a message without the value: the URL may hold a key).
 */
export const parseEndpoint = (raw: string): { readonly url: string } | { readonly error: string } => {
  let url: URL
  try {
    url = new URL(raw.trim())
  } catch {
    return { error: `${endpointVariable}: must be an http(s) URL (the collector's OTLP/HTTP base, e.g. https://otlp.example.com)` }
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return { error: `${endpointVariable}: must be an http(s) URL, got the scheme ${url.protocol}` }
  const path = url.pathname.replace(/\/+$/, "")
  url.pathname = path.endsWith("/v1/traces") ? path : `${path}/v1/traces`
  return { url: url.toString() }
}

/** `FACTLINE_OTLP_HEADERS` (`key=value,key2=value2`, values URL-encoded if they need to be); errors name the entry's position, never its value. */
export const parseHeaders = (raw: string): { readonly headers: Readonly<Record<string, string>> } | { readonly error: string } => {
  const headers: Record<string, string> = {}
  const entries = raw.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")
  for (const [index, entry] of entries.entries()) {
    const at = entry.indexOf("=")
    const key = at < 0 ? "" : entry.slice(0, at).trim().toLowerCase()
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(key)) return { error: `${headersVariable}: entry ${index + 1} is not key=value with a header name as key` }
    try {
      headers[key] = decodeURIComponent(entry.slice(at + 1).trim())
    } catch {
      return { error: `${headersVariable}: the value of entry ${index + 1} (${key}) is not valid URL encoding` }
    }
  }
  return { headers }
}

/** `OTEL_RESOURCE_ATTRIBUTES` (`key=value,key2=value2`, URL-decoded, as the OpenTelemetry SDKs read it). */
export const parseResourceAttributes = (raw: string): { readonly attributes: Readonly<Record<string, string>> } | { readonly error: string } => {
  const attributes: Record<string, string> = {}
  const entries = raw.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")
  for (const [index, entry] of entries.entries()) {
    const at = entry.indexOf("=")
    if (at <= 0) return { error: `${resourceAttributesVariable}: entry ${index + 1} is not key=value` }
    try {
      attributes[decodeURIComponent(entry.slice(0, at).trim())] = decodeURIComponent(entry.slice(at + 1).trim())
    } catch {
      return { error: `${resourceAttributesVariable}: entry ${index + 1} is not valid URL encoding` }
    }
  }
  return { attributes }
}

const optional = (name: string) => Config.option(Config.String(name)).pipe(Config.map(Option.getOrUndefined))

/** The export settings; a malformed endpoint or headers variable fails the runtime naming it (as a bad shard count does). */
export const config: Config.Config<Shape> = Config.all({
  tracesUrl: optional(endpointVariable).pipe(Config.mapEffect((raw) => {
    if (raw === undefined || raw.trim() === "") return Effect.succeed(undefined)
    const parsed = parseEndpoint(raw)
    return "url" in parsed ? Effect.succeed(parsed.url) : Effect.die(new Error(parsed.error))
  })),
  headers: optional(headersVariable).pipe(Config.mapEffect((raw) => {
    const parsed = parseHeaders(raw ?? "")
    return "headers" in parsed ? Effect.succeed(Redacted.make(parsed.headers)) : Effect.die(new Error(parsed.error))
  })),
  serviceName: optional(serviceNameVariable).pipe(Config.map((name) => (name === undefined || name.trim() === "" ? "factline" : name.trim()))),
  resourceAttributes: optional(resourceAttributesVariable).pipe(Config.mapEffect((raw) => {
    const parsed = parseResourceAttributes(raw ?? "")
    return "attributes" in parsed ? Effect.succeed(parsed.attributes) : Effect.die(new Error(parsed.error))
  }))
})

/** Whether spans are exported (the layer says true when an endpoint is set): the combinators below add nothing otherwise. */
export const Exporting = Context.Reference<boolean>("factline/Telemetry/Exporting", { defaultValue: () => false })

/** Ended spans waiting in the isolate are sent once this many have gathered, without waiting for the flush. */
const maxBatchSize = 512

/**
 * The tracer and its flusher from the settings: with an endpoint, the OTLP/JSON exporter (OtlpExport.ts: one
 * `fetch` per flush; the Worker flushes at the end of every invocation, it has no background time for an
 * interval); without one, a flusher with nothing to send and the default tracer.
 */
export const layer: Layer.Layer<OtlpExport.Flusher> = Layer.unwrap(Effect.map(config, (settings) =>
  settings.tracesUrl === undefined
    ? OtlpExport.layerIdle
    : Layer.merge(
      OtlpExport.layer({
        url: settings.tracesUrl,
        headers: Redacted.value(settings.headers),
        resource: { ...settings.resourceAttributes, "service.name": settings.serviceName },
        maxBatchSize
      }),
      Layer.succeed(Exporting, true)
    ))).pipe(Layer.orDie)

/** Sends the spans ended so far (at most 10 s; an unreachable collector is skipped for a minute, never an error). */
export const flush: Effect.Effect<void, never, OtlpExport.Flusher> = Effect.flatMap(Effect.service(OtlpExport.Flusher), (flusher) => flusher.flush).pipe(
  Effect.timeoutOption(Duration.seconds(10)),
  Effect.asVoid
)

/** The span a valid `traceparent` names (its parent-id), as the parent of the spans that continue it; undefined otherwise. */
export const spanOf = (traceparent: unknown): Tracer.ExternalSpan | undefined => {
  const parsed = TraceContext.parse(traceparent)
  return parsed === undefined
    ? undefined
    : Tracer.externalSpan({ traceId: parsed.traceId, spanId: parsed.parentId, sampled: (Number.parseInt(parsed.flags, 16) & 1) === 1 })
}

/** Most traces one batch's span links to (a batch of 100 fact messages can carry thousands of facts). */
const maxLinks = 128

const traceparentOf = (value: unknown): unknown => (typeof value === "object" && value !== null ? (value as { readonly traceparent?: unknown }).traceparent : undefined)

/**
 * The `traceparent`s a queue message carries: an envelope's or a webhook delivery's own, every fact's of a fact
 * message (`payload.facts`, `payload.fact`), a dead letter's original message's.
 */
export const traceparentsOf = (body: unknown): ReadonlyArray<string> => {
  if (typeof body !== "object" || body === null) return []
  const own = traceparentOf(body)
  if (typeof own === "string") return [own]
  const { payload, original_message } = body as { readonly payload?: unknown; readonly original_message?: unknown }
  if (original_message !== undefined) return traceparentsOf(original_message)
  if (typeof payload !== "object" || payload === null) return []
  const { facts, fact } = payload as { readonly facts?: unknown; readonly fact?: unknown }
  const list: ReadonlyArray<unknown> = Array.isArray(facts) ? facts : fact === undefined ? [] : [fact]
  return list.map(traceparentOf).filter((value): value is string => typeof value === "string")
}

/**
 * Runs `self` in a new span continuing the first valid `traceparent` (a child of the span it names), linked to
 * the other traces (one link per distinct trace id, at most 128). With none, the span starts a trace of its own.
 * Unchanged when not exporting, and `traceparents` is then not even read (a batch's bodies are not scanned).
 */
export const continuing = (name: string, traceparents: () => Iterable<unknown>, options: { readonly kind?: Tracer.SpanKind; readonly attributes?: Record<string, unknown> } = {}) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.service(Exporting), (exporting) => {
    if (!exporting) return self
    let parent: Tracer.ExternalSpan | undefined
    const links: Array<Tracer.SpanLink> = []
    const seen = new Set<string>()
    for (const value of traceparents()) {
      // A trace seen already costs no parse (a fact message's facts mostly share one).
      if (typeof value !== "string" || seen.has(value.slice(3, 35))) continue
      const span = spanOf(value)
      if (span === undefined || seen.has(span.traceId)) continue
      seen.add(span.traceId)
      if (parent === undefined) parent = span
      else links.push({ span, attributes: {} })
      if (links.length >= maxLinks) break
    }
    return Effect.withSpan(self, name, { ...options, ...(parent === undefined ? { root: true } : { parent }), links })
  })

const notOurs = (_traceparent: string | undefined): string | undefined => undefined

/**
 * How a hop names its sender, read once per batch or decision round: a function giving, for a `traceparent` of
 * the current span's trace, the same trace with the current span as its parent-id — so the next hop's spans hang
 * under the span that sent them, one tree from the request to the webhook POST — and undefined for any other
 * trace, or when not exporting (a hop then takes W3C's new parent-id, `TraceContext.child`, as ever).
 */
export const sender: Effect.Effect<(traceparent: string | undefined) => string | undefined> = Effect.flatMap(Effect.service(Exporting), (exporting) =>
  !exporting
    ? Effect.succeed(notOurs)
    : Effect.map(Effect.option(Effect.currentSpan), (current) => {
      if (Option.isNone(current)) return notOurs
      const { spanId, traceId } = current.value
      return (traceparent: string | undefined) => {
        const parsed = TraceContext.parse(traceparent)
        return parsed === undefined || parsed.traceId !== traceId ? undefined : TraceContext.format({ traceId, parentId: spanId, flags: parsed.flags })
      }
    }))

/** Runs `self` (whose own span is then the child) under the span a `traceparent` names; unchanged when not exporting or with none. */
export const under = (traceparent: unknown) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.service(Exporting), (exporting) => {
    const parent = exporting ? spanOf(traceparent) : undefined
    return parent === undefined ? self : Effect.withParentSpan(self, parent)
  })
