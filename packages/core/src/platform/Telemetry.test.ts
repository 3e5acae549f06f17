import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Tracer from "effect/Tracer"
import { describe, expect, it } from "vitest"
import * as Telemetry from "./Telemetry.js"

const a = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
const b = "00-12daff6d352525b8b7fc7d05bd1aaea2-355b41ff0e816927-01"

/** A tracer that keeps every span it starts. */
const recording = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span(options) {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  return { spans, tracer }
}

const settingsOf = (vars: Record<string, string>) => Effect.runSync(Telemetry.config.parse(ConfigProvider.fromUnknown(vars)))

describe("Telemetry settings", () => {
  it("are off without FACTLINE_OTLP_ENDPOINT, with the service name factline", () => {
    expect(settingsOf({})).toMatchObject({ tracesUrl: undefined, serviceName: "factline" })
    expect(Redacted.value(settingsOf({}).headers)).toEqual({})
  })

  it("append /v1/traces to a base endpoint (as OTEL_EXPORTER_OTLP_ENDPOINT) and keep one that has it", () => {
    expect(Telemetry.parseEndpoint("https://otlp.example.com")).toEqual({ url: "https://otlp.example.com/v1/traces" })
    expect(Telemetry.parseEndpoint("https://otlp.example.com/otlp/")).toEqual({ url: "https://otlp.example.com/otlp/v1/traces" })
    expect(Telemetry.parseEndpoint("http://127.0.0.1:4318/v1/traces")).toEqual({ url: "http://127.0.0.1:4318/v1/traces" })
    expect(Telemetry.parseEndpoint("otlp.example.com")).toMatchObject({ error: expect.stringContaining("FACTLINE_OTLP_ENDPOINT") })
    expect(Telemetry.parseEndpoint("ftp://otlp.example.com")).toMatchObject({ error: expect.stringContaining("ftp:") })
  })

  it("read the headers as key=value pairs, URL-decoded, and name a bad entry by position, never by its value", () => {
    expect(Telemetry.parseHeaders("Authorization=Bearer k1 , x-scope=a%20b")).toEqual({ headers: { authorization: "Bearer k1", "x-scope": "a b" } })
    const bad = Telemetry.parseHeaders("x-api-key=ok,secret-without-a-key")
    expect(bad).toEqual({ error: "FACTLINE_OTLP_HEADERS: entry 2 is not key=value with a header name as key" })
    expect(JSON.stringify(Telemetry.parseHeaders("x-api-key=%E0%A4%A"))).not.toContain("%E0")
  })

  it("keep the headers redacted", () => {
    const settings = settingsOf({ FACTLINE_OTLP_ENDPOINT: "https://otlp.example.com", FACTLINE_OTLP_HEADERS: "x-api-key=s3cret" })
    expect(String(settings.headers)).not.toContain("s3cret")
    expect(JSON.stringify(settings)).not.toContain("s3cret")
  })

  it("fail the runtime naming the variable when the endpoint is not a URL", () => {
    const exit = Effect.runSyncExit(Layer.build(Telemetry.layer).pipe(Effect.scoped, Effect.provide(ConfigProvider.layer(ConfigProvider.fromUnknown({ FACTLINE_OTLP_ENDPOINT: "not a url" })))))
    expect(String(exit)).toContain("FACTLINE_OTLP_ENDPOINT")
  })
})

describe("Telemetry.traceparentsOf", () => {
  it("reads an envelope's or a delivery's own, every fact's of a fact message, a dead letter's original's", () => {
    expect(Telemetry.traceparentsOf({ idempotency_key: "k", traceparent: a })).toEqual([a])
    expect(Telemetry.traceparentsOf({ type: "facts.batch", payload: { facts: [{ traceparent: a }, { traceparent: b }, {}] } })).toEqual([a, b])
    expect(Telemetry.traceparentsOf({ payload: { fact: { traceparent: b } } })).toEqual([b])
    expect(Telemetry.traceparentsOf({ original_message: { traceparent: a }, failure: {} })).toEqual([a])
    expect(Telemetry.traceparentsOf("text")).toEqual([])
    expect(Telemetry.traceparentsOf(null)).toEqual([])
  })
})

describe("Telemetry.continuing and under", () => {
  it("add no span when not exporting (the default)", () => {
    const { spans, tracer } = recording()
    const program = Effect.succeed(1).pipe(Telemetry.continuing("batch", () => {
      throw new Error("read though not exporting")
    }), Telemetry.under(b))
    expect(Effect.runSync(program.pipe(Effect.provideService(Tracer.Tracer, tracer)))).toBe(1)
    expect(spans).toEqual([])
  })

  it("exporting, start a span under the first trace, linked to each other trace once", () => {
    const { spans, tracer } = recording()
    const program = Effect.withSpan(Effect.void, "step").pipe(Telemetry.continuing("batch", () => ["not a traceparent", a, b, b.replace("355b", "455b")], { kind: "consumer" }))
    Effect.runSync(program.pipe(Effect.provideService(Tracer.Tracer, tracer), Effect.provideService(Telemetry.Exporting, true)))
    const [batch, step] = spans
    expect(batch).toMatchObject({ name: "batch", kind: "consumer", traceId: "4bf92f3577b34da6a3ce929d0e0e4736" })
    expect(batch!.parent).toMatchObject({ _tag: "Some", value: { spanId: "00f067aa0ba902b7" } })
    expect(batch!.links.map((l) => l.span.traceId)).toEqual(["12daff6d352525b8b7fc7d05bd1aaea2"])
    expect(step!.traceId).toBe(batch!.traceId)
  })

  it("exporting, start a trace of its own when no message carries one", () => {
    const { spans, tracer } = recording()
    Effect.runSync(Effect.void.pipe(Telemetry.continuing("batch", () => [undefined]), Effect.withSpan("outer"), Effect.provideService(Tracer.Tracer, tracer), Effect.provideService(Telemetry.Exporting, true)))
    const batch = spans.find((s) => s.name === "batch")!
    expect(batch.parent._tag).toBe("None")
  })

  it("exporting, put a span under the span a traceparent names", () => {
    const { spans, tracer } = recording()
    Effect.runSync(Effect.withSpan(Effect.void, "post").pipe(Telemetry.under(b), Effect.provideService(Tracer.Tracer, tracer), Effect.provideService(Telemetry.Exporting, true)))
    expect(spans[0]).toMatchObject({ name: "post", traceId: "12daff6d352525b8b7fc7d05bd1aaea2" })
    expect(spans[0]!.parent).toMatchObject({ _tag: "Some", value: { spanId: "355b41ff0e816927" } })
  })
})
