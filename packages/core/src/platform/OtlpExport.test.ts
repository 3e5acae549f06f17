import { createServer } from "node:http"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as OtlpExport from "./OtlpExport.js"
import * as Telemetry from "./Telemetry.js"

/** A local OTLP/HTTP collector (a fake of the external service): answers each POST with the next status of `answers` (200 when none is left). */
const collector = () => {
  const received: Array<{ readonly headers: Record<string, unknown>; readonly body: any }> = []
  const answers: Array<number> = []
  const server = createServer((req, res) => {
    let text = ""
    const decoder = new TextDecoder()
    req.on("data", (chunk) => void (text += decoder.decode(chunk, { stream: true })))
    req.on("end", () => {
      received.push({ headers: req.headers, body: JSON.parse(text) })
      res.writeHead(answers.shift() ?? 200)
      res.end("{}")
    })
  })
  return { server, received, answers }
}

const otlp = collector()
let url = ""
beforeAll(async () => {
  await new Promise<void>((resolve) => otlp.server.listen(0, "127.0.0.1", resolve))
  url = `http://127.0.0.1:${(otlp.server.address() as { readonly port: number }).port}/v1/traces`
})
afterAll(() => new Promise<void>((resolve) => otlp.server.close(() => resolve())))

/** Runs `program` with an exporter to the collector, then flushes (as the Worker does after an invocation). */
const exporting = (program: Effect.Effect<unknown, unknown>, maxBatchSize = 512) =>
  Effect.runPromise(Effect.gen(function*() {
    yield* Effect.exit(program)
    yield* Telemetry.flush
  }).pipe(Effect.provide(OtlpExport.layer({ url, headers: { "x-api-key": "k1" }, resource: { "service.name": "svc", "deployment.environment": "test" }, maxBatchSize }))))

const spansOf = (body: any): Array<any> => body.resourceSpans[0].scopeSpans[0].spans

describe("OtlpExport", () => {
  it("sends the ended spans as OTLP JSON with the headers and resource: parent, kind, attributes, an error's status and exception event", async () => {
    otlp.received.length = 0
    await exporting(Effect.fail(new Error("boom")).pipe(
      Effect.withSpan("child", { kind: "client", attributes: { n: 3, ok: true, ratio: 0.5 } }),
      Effect.withSpan("parent", { kind: "server" })
    ))
    expect(otlp.received).toHaveLength(1)
    const { headers, body } = otlp.received[0]!
    expect(headers["x-api-key"]).toBe("k1")
    expect(headers["content-type"]).toBe("application/json")
    expect(headers["user-agent"]).toMatch(/^OTel-OTLP-Exporter-JavaScript-Effect-OtlpTracer\//)
    expect(body.resourceSpans[0].resource.attributes).toEqual(expect.arrayContaining([
      { key: "service.name", value: { stringValue: "svc" } },
      { key: "deployment.environment", value: { stringValue: "test" } }
    ]))
    const spans = spansOf(body)
    const child = spans.find((s) => s.name === "child")
    const parent = spans.find((s) => s.name === "parent")
    expect(child).toMatchObject({ parentSpanId: parent.spanId, traceId: parent.traceId, kind: 3, status: { code: 2, message: "boom" } })
    expect(parent.kind).toBe(2)
    expect(child.attributes).toEqual(expect.arrayContaining([
      { key: "n", value: { intValue: 3 } },
      { key: "ok", value: { boolValue: true } },
      { key: "ratio", value: { doubleValue: 0.5 } }
    ]))
    expect(child.events[0]).toMatchObject({ name: "exception", attributes: expect.arrayContaining([{ key: "exception.message", value: { stringValue: "boom" } }]) })
  })

  it("retries a 503, and sends at once when maxBatchSize spans have gathered (the flush waits for that send)", async () => {
    otlp.received.length = 0
    otlp.answers.push(503)
    await exporting(Effect.void.pipe(Effect.withSpan("a"), Effect.andThen(Effect.void.pipe(Effect.withSpan("b")))), 2)
    // The 503'd export and its retry carry the same two spans; nothing is left for the flush.
    expect(otlp.received.map((r) => spansOf(r.body).map((s: any) => s.name))).toEqual([["a", "b"], ["a", "b"]])
  })

  it("drops a refused export's spans and skips exporting until 60 s have passed; the flush does not fail", async () => {
    otlp.received.length = 0
    otlp.answers.push(400)
    await Effect.runPromise(Effect.gen(function*() {
      yield* Effect.void.pipe(Effect.withSpan("refused"))
      yield* Telemetry.flush
      yield* Effect.void.pipe(Effect.withSpan("skipped"))
      yield* Telemetry.flush
    }).pipe(Effect.provide(OtlpExport.layer({ url, headers: {}, resource: {}, maxBatchSize: 512 }))))
    expect(otlp.received.map((r) => spansOf(r.body).map((s: any) => s.name))).toEqual([["refused"]])
  })

  it("is idle when off: the flusher sends nothing", async () => {
    otlp.received.length = 0
    await Effect.runPromise(Effect.void.pipe(Effect.withSpan("x"), Effect.andThen(Telemetry.flush), Effect.provide(Layer.merge(OtlpExport.layerIdle, Layer.empty))))
    expect(otlp.received).toEqual([])
  })
})

describe("Telemetry.parseResourceAttributes", () => {
  it("reads OTEL_RESOURCE_ATTRIBUTES as key=value pairs, URL-decoded, and names a bad entry by position", () => {
    expect(Telemetry.parseResourceAttributes("deployment.environment=prod, team=a%20b")).toEqual({ attributes: { "deployment.environment": "prod", team: "a b" } })
    expect(Telemetry.parseResourceAttributes("ok=1,novalue")).toEqual({ error: "OTEL_RESOURCE_ATTRIBUTES: entry 2 is not key=value" })
  })
})
