/**
 * The OTLP/HTTP (JSON) trace exporter behind Telemetry: a `Tracer` whose spans, once ended and sampled, wait in
 * the isolate as OTLP JSON spans, and a `Flusher` that POSTs them with `fetch`. It writes what Effect's
 * `OtlpTracer` writes (the same span, status, event and resource fields) without Effect's `HttpClient` under it:
 * that client stack (with its retry schedule, `FiberSet` and config-driven resource) was 11.5 KiB gzip of the
 * Worker's bundle for one POST per invocation (docs/performance.md, "Bundle size").
 *
 * An export is retried 3 times (1 s apart; a 429's `Retry-After`, at most 5 s) on a network error, 408, 429 or
 * 5xx; when it still fails, or the collector refuses it otherwise, its spans are dropped and exporting is
 * skipped for 60 s. A flush never fails. When `maxBatchSize` spans have gathered they are sent at once, and the
 * next flush waits for that send too.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { format } from "effect/Formatter"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import * as Version from "effect/Version"

/** Sends the spans ended so far, and waits for the sends already started; never fails. */
export class Flusher extends Context.Service<Flusher, { readonly flush: Effect.Effect<void> }>()("@factline/core/platform/Telemetry/Flusher") {}

/** A flusher with nothing to send (export is off). */
export const layerIdle: Layer.Layer<Flusher> = Layer.succeed(Flusher)({ flush: Effect.void })

export interface Options {
  /** `<endpoint>/v1/traces`. */
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  /** The resource's attributes (`service.name` among them). */
  readonly resource: Readonly<Record<string, string>>
  readonly maxBatchSize: number
}

type Attribute = { readonly key: string; readonly value: AnyValue }
type AnyValue =
  | { readonly stringValue: string }
  | { readonly intValue: number | string }
  | { readonly doubleValue: number }
  | { readonly boolValue: boolean }
  | { readonly arrayValue: { readonly values: ReadonlyArray<AnyValue> } }

const int64Bound = 2 ** 63

/** A value as an OTLP `AnyValue` (as Effect's `OtlpResource.unknownToAttributeValue`). */
const valueOf = (value: unknown): AnyValue => {
  if (Array.isArray(value)) return { arrayValue: { values: value.map(valueOf) } }
  switch (typeof value) {
    case "string":
      return { stringValue: value }
    case "bigint":
      return BigInt.asIntN(64, value) === value ? { intValue: String(value) } : { stringValue: String(value) }
    case "number":
      return Number.isInteger(value) && value >= -int64Bound && value < int64Bound
        ? { intValue: Number.isSafeInteger(value) ? value : String(BigInt(value)) }
        : { doubleValue: value }
    case "boolean":
      return { boolValue: value }
    default:
      return { stringValue: format(value) }
  }
}

const attributesOf = (entries: Iterable<readonly [string, unknown]>): Array<Attribute> => Array.from(entries, ([key, value]) => ({ key, value: valueOf(value) }))

const kinds: Record<Tracer.SpanKind, number> = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 }

/** An ended span in OTLP JSON (the fields and status rules of Effect's `OtlpTracer`). */
const toOtlp = (span: Tracer.NativeSpan, endTime: bigint, exit: Exit.Exit<unknown, unknown>) => {
  const attributes = span._attributes === undefined ? [] : attributesOf(span._attributes)
  const events: Array<unknown> = (span._events ?? []).map(([name, time, eventAttributes]) => ({
    name,
    timeUnixNano: String(time),
    attributes: attributesOf(Object.entries(eventAttributes)),
    droppedAttributesCount: 0
  }))
  let status: { readonly code: number; readonly message?: string }
  if (Exit.isSuccess(exit)) status = { code: 1 }
  else if (Cause.hasInterruptsOnly(exit.cause)) {
    status = { code: 0 }
    attributes.push({ key: "effect.fiber.interrupted", value: { boolValue: true } })
  } else {
    const errors = Cause.prettyErrors(exit.cause)
    const first = errors[0]
    status = first === undefined ? { code: 1 } : { code: 2, message: first.message }
    for (const error of errors) {
      events.push({
        name: "exception",
        timeUnixNano: String(endTime),
        droppedAttributesCount: 0,
        attributes: attributesOf([["exception.type", error.name], ["exception.message", error.message], ["exception.stacktrace", error.stack ?? "No stack trace available"]])
      })
    }
  }
  return {
    traceId: span.traceId.padStart(32, "0"),
    spanId: span.spanId,
    parentSpanId: Option.isSome(span.parent) ? span.parent.value.spanId : undefined,
    name: span.name,
    kind: kinds[span.kind] ?? 0,
    startTimeUnixNano: String(span.startTime),
    endTimeUnixNano: String(endTime),
    attributes,
    droppedAttributesCount: 0,
    events,
    droppedEventsCount: 0,
    status,
    links: span.links.map((link) => ({
      traceId: link.span.traceId.padStart(32, "0"),
      spanId: link.span.spanId,
      attributes: attributesOf(Object.entries(link.attributes)),
      droppedAttributesCount: 0
    })),
    droppedLinksCount: 0
  }
}

/** A native span that hands itself, once ended, to `push` (when sampled). */
class ExportedSpan extends Tracer.NativeSpan {
  constructor(options: ConstructorParameters<typeof Tracer.NativeSpan>[0], private readonly push: (span: unknown) => void) {
    super(options)
  }
  override end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    if (this.status._tag === "Ended") return
    super.end(endTime, exit)
    if (this.sampled) this.push(toOtlp(this, endTime, exit))
  }
}

const transient = (status: number) => status === 408 || status === 429 || status >= 500
const retries = 3

/** How long to wait before retrying a refused export: a 429's `Retry-After` seconds (at most 5), else 1 s. */
const delayOf = (response: Response | undefined) => {
  const after = response?.status === 429 ? Number(response.headers.get("retry-after")) : Number.NaN
  return Number.isFinite(after) && after >= 0 ? Math.min(after, 5) * 1000 : 1000
}

/** The tracer and the flusher of one exporter: its buffer lives as long as the layer (the isolate's runtime). */
export const layer = (options: Options): Layer.Layer<Flusher> =>
  Layer.effectContext(Effect.sync(() => {
    const version = Version.getCurrentVersion()
    const agent = `OTel-OTLP-Exporter-JavaScript-Effect-OtlpTracer/${version}`
    const userAgent = Object.entries(options.headers).find(([key]) => key.toLowerCase() === "user-agent")?.[1]
    const headers = { ...options.headers, "content-type": "application/json", "user-agent": userAgent === undefined ? agent : `${userAgent} ${agent}` }
    const resource = {
      attributes: attributesOf(Object.entries({ "telemetry.sdk.name": "effect", "telemetry.sdk.language": "nodejs", "telemetry.sdk.version": version, ...options.resource })),
      droppedAttributesCount: 0
    }
    const scope = { name: "effect", version }
    let buffer: Array<unknown> = []
    /** While set, spans are dropped; the first send after it re-enables exporting. */
    let disabledUntil: number | undefined
    const sending = new Set<Promise<void>>()

    const post = (body: string) =>
      Effect.gen(function*() {
        for (let attempt = 0; ; attempt++) {
          const response = yield* Effect.tryPromise({
            try: (signal) => fetch(options.url, { method: "POST", headers, body, signal }),
            catch: (error) => error
          }).pipe(Effect.orElseSucceed(() => undefined))
          if (response !== undefined) yield* Effect.promise(() => response.arrayBuffer().catch(() => undefined))
          if (response?.ok) return
          if (attempt >= retries || (response !== undefined && !transient(response.status))) {
            return yield* Effect.fail(`the collector answered ${response === undefined ? "nothing" : response.status}`)
          }
          yield* Effect.sleep(delayOf(response))
        }
      })

    /** Sends what is buffered; a failed export drops its spans and skips exporting for 60 s. */
    const send = Effect.gen(function*() {
      if (disabledUntil !== undefined) {
        if ((yield* Clock.currentTimeMillis) < disabledUntil) return
        disabledUntil = undefined
      }
      if (buffer.length === 0) return
      const spans = buffer
      buffer = []
      yield* post(JSON.stringify({ resourceSpans: [{ resource, scopeSpans: [{ scope, spans }] }] })).pipe(
        Effect.catch(() => Effect.map(Clock.currentTimeMillis, (at) => void (disabledUntil = at + 60_000)))
      )
    })

    const push = (span: unknown) => {
      if (disabledUntil !== undefined) return
      buffer.push(span)
      if (buffer.length < options.maxBatchSize) return
      const started = Effect.runPromise(send).finally(() => sending.delete(started))
      sending.add(started)
    }

    const tracer = Tracer.make({ span: (spanOptions) => new ExportedSpan(spanOptions, push) })
    const flush = Effect.andThen(send, Effect.promise(() => Promise.all(sending).then(() => undefined)))
    return Context.make(Tracer.Tracer, tracer).pipe(Context.add(Flusher, Flusher.of({ flush })))
  }))
