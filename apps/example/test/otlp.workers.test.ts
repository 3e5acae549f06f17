/**
 * Traces that leave the Worker (core's Telemetry): with `FACTLINE_OTLP_ENDPOINT` set, the platform's spans are
 * exported over OTLP/HTTP (JSON) to a real local collector (scripts/OtlpReceiver.mjs, started by
 * vitest.config.ts), flushed after each invocation, and one trace — the one the `traceparent` header names —
 * runs from `POST /v1/events` through the events consumer and its ledger append, fact processing, the
 * projections consumer's write and the webhook delivery's POST. Without the setting (the rest of the suite)
 * nothing is exported.
 */
import { env } from "cloudflare:workers"
import { afterEach, describe, expect, it, vi } from "vitest"
import { TraceContext } from "@factline/schemas"
import { drain } from "./Drain.js"
import { callCompleted, eventually, request, tokenA, unique } from "./helpers.js"
import { overrideSettings } from "./worker.js"

interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly service: string
  readonly attributes: Record<string, unknown>
}

/** OTLP's SpanKind numbers. */
const kind = { server: 2, client: 3, consumer: 5 } as const

const traceId = () => [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("")
const spansOf = async (trace: string): Promise<ReadonlyArray<Span>> => (await fetch(`${env.TEST_OTLP_URL}/spans?trace_id=${trace}`)).json()

const created: Array<string> = []
afterEach(async () => {
  overrideSettings(undefined)
  vi.restoreAllMocks()
  for (const id of created.splice(0)) await request(`/v1/webhooks/endpoints/${id}`, { method: "DELETE", token: tokenA })
})

/** A webhook endpoint on the test receiver for charges; its path. */
const chargesEndpoint = async () => {
  const path = `/hooks/ok-${unique("otlp")}`
  const response = await request("/v1/webhooks/endpoints", {
    method: "POST",
    token: tokenA,
    body: JSON.stringify({ url: `${env.TEST_RECEIVER_URL}${path}`, event_types: ["charge.created"] })
  })
  expect(response.status).toBe(201)
  created.push((await response.json<{ id: string }>()).id)
  return path
}

/** The span's ancestors (itself first) among the recorded spans of its trace. */
const ancestry = (spans: ReadonlyArray<Span>, span: Span): Array<Span> => {
  const byId = new Map(spans.map((s) => [s.spanId, s]))
  const chain = [span]
  for (let at = byId.get(span.parentSpanId ?? ""); at !== undefined && chain.length < 100; at = byId.get(at.parentSpanId ?? "")) chain.push(at)
  return chain
}

describe("OTLP trace export", () => {
  it("one trace covers POST /v1/events, the events consumer and its ledger append, the projections write and the webhook POST", async () => {
    const prefix = `/${unique("collector")}`
    overrideSettings({
      FACTLINE_OTLP_ENDPOINT: `${env.TEST_OTLP_URL}${prefix}`,
      FACTLINE_OTLP_HEADERS: "authorization=Bearer otlp-secret-7f3a,x-tenant=factline%20tests",
      FACTLINE_OTLP_SERVICE_NAME: "factline-example"
    })
    const lines: Array<string> = []
    for (const method of ["log", "info", "warn", "error", "debug"] as const) {
      vi.spyOn(console, method).mockImplementation((...args: Array<unknown>) => void lines.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a) ?? String(a))).join(" ")))
    }
    const hook = await chargesEndpoint()

    const trace = traceId()
    const call = callCompleted({}, { duration_s: 90 })
    const accepted = await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify(call), headers: { traceparent: `00-${trace}-00f067aa0ba902b7-01` } })
    expect(accepted.status).toBe(202)
    await drain()

    const want = ["POST /v1/events", "factline-events process", "Ledger.append", "factline-fact-processing process", "factline-projections process", "ProjectionStore.write", "factline-webhooks process", "WebhookTransport.post"]
    // Flushed with waitUntil after each invocation: the last export may land just after the drain.
    const spans = await eventually(async () => {
      const got = await spansOf(trace)
      return want.every((name) => got.some((s) => s.name === name)) ? got : undefined
    }, 20_000, `spans ${want.join(", ")} in trace ${trace}`)
    const named = (name: string) => spans.find((s) => s.name === name)!

    for (const s of spans) expect(s.service, s.name).toBe("factline-example")
    // The HTTP request is the caller's child; every queue hop a consumer span, its steps below it.
    expect(named("POST /v1/events")).toMatchObject({ parentSpanId: "00f067aa0ba902b7", kind: kind.server, attributes: { "http.route": "/v1/events", "factline.tenant_id": "tenant-a" } })
    expect(ancestry(spans, named("POST /v1/events")).map((s) => s.name)).toEqual(["POST /v1/events"])
    expect(ancestry(spans, spans.find((s) => s.name === "Producer.accept")!).map((s) => s.name)).toContain("POST /v1/events")
    expect(ancestry(spans, named("Ledger.append")).map((s) => s.name)).toContain("factline-events process")
    expect(ancestry(spans, named("ProjectionStore.write")).map((s) => s.name)).toContain("factline-projections process")
    for (const name of ["factline-events process", "factline-projections process", "factline-webhooks process"]) {
      expect(named(name).kind, name).toBe(kind.consumer)
    }
    // One tree: each hop's message names the span that sent it (Telemetry.sender), so every span hangs under the
    // request's — the webhook POST under the delivery hop, the fan-out, fact processing and the events consumer.
    const hops = (name: string) => ancestry(spans, named(name)).map((s) => s.name).filter((n) => n === name || n.endsWith(" process") || n === "POST /v1/events")
    expect(hops("WebhookTransport.post")).toEqual([
      "WebhookTransport.post", "factline-webhooks process", "factline-webhooks process", "factline-fact-processing process", "factline-events process", "POST /v1/events"
    ])
    expect(hops("ProjectionStore.write").slice(1).at(0)).toBe("factline-projections process")
    expect(hops("ProjectionStore.write").slice(-2)).toEqual(["factline-events process", "POST /v1/events"])
    // The webhook POST: a client span under the traceparent the receiver got, inside the webhooks consumer's span.
    const post = named("WebhookTransport.post")
    expect(post).toMatchObject({ kind: kind.client, attributes: { "http.response.status_code": 200 } })
    const received = await (await fetch(`${env.TEST_RECEIVER_URL}/received?path=${hook}`)).json<Array<{ headers: { traceparent?: string } }>>()
    expect(received).toHaveLength(1)
    expect(TraceContext.parse(received[0]!.headers.traceparent)).toMatchObject({ traceId: trace, parentId: post.parentSpanId })

    // The configured headers went with every export; the secret is in no log line.
    const exports = await (await fetch(`${env.TEST_OTLP_URL}/exports?prefix=${prefix}`)).json<Array<{ headerNames: Array<string>; authorization?: string }>>()
    expect(exports.length).toBeGreaterThan(0)
    for (const e of exports) expect(e).toMatchObject({ authorization: "Bearer otlp-secret-7f3a", headerNames: expect.arrayContaining(["x-tenant"]) })
    expect(lines.filter((line) => line.includes("otlp-secret-7f3a"))).toEqual([])
  })

  it("without FACTLINE_OTLP_ENDPOINT nothing is exported", async () => {
    const trace = traceId()
    const call = callCompleted({}, { duration_s: 90 })
    const accepted = await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify(call), headers: { traceparent: `00-${trace}-00f067aa0ba902b7-01` } })
    expect(accepted.status).toBe(202)
    await drain()
    // The exporting test above sees its spans within a second or two of its drain; here nothing comes.
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(await spansOf(trace)).toEqual([])
  })
})
