import { afterEach, describe, expect, it } from "vitest"
import { Client, Forbidden, IdempotencyConflict, InvalidEvents, InvalidPayload, InvalidQuery, NotFound, Unauthorized, Unavailable } from "../src/index.js"
import * as FaultServer from "./FaultServer.js"
import { CallCompleted, Charge, callsProjection, NoteAdded, Outcome, payload } from "./Definitions.js"

let server: FaultServer.FaultServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

const serve = async (answer: (request: FaultServer.Received, n: number) => FaultServer.Reply) => {
  server = await FaultServer.start(answer)
  return server
}

/** A client with short retry delays (the policy is the same; only the waits shrink). */
const client = (url: string, config: Partial<Client.Config> = {}) =>
  Client.make({ baseUrl: url, token: "test-token", retry: { maxAttempts: 4, initialDelayMs: 5, maxDelayMs: 2_000 }, ...config })

const emitCall = (c: Client.Client, id: string) => c.emit(CallCompleted, payload(id), { subject: id, idempotency_key: `call.completed:${id}` })

/** What a promise settled with, for asserting on rejections and resolutions alike. */
const settle = <A>(promise: Promise<A>) => promise.then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }))

const keysOf = (request: FaultServer.Received) => request.events.map((e) => e.idempotency_key)

describe("emitting", () => {
  it("sends a complete envelope of the definition's latest version, with the bearer token", async () => {
    const s = await serve((r) => FaultServer.accepted(r))
    const c = client(s.url, { source: "billing" })
    const emitted = await c.emit(CallCompleted, payload("c1"), { subject: "c1", idempotency_key: "call.completed:c1", created_at: new Date("2026-11-22T10:00:00Z") })
    expect(emitted).toEqual({ idempotency_key: "call.completed:c1", duplicate: false })
    expect(s.received).toHaveLength(1)
    const [request] = s.received
    expect(request!.method).toBe("POST")
    expect(request!.url).toBe("/v1/events")
    expect(request!.headers.authorization).toBe("Bearer test-token")
    expect(request!.headers["content-type"]).toBe("application/json")
    expect(request!.events).toEqual([{
      schema_version: 2,
      message_type: "call.completed",
      message_id: expect.stringMatching(/^msg_[0-9a-f]{32}$/),
      idempotency_key: "call.completed:c1",
      subject: "c1",
      created_at: "2026-11-22T10:00:00.000Z",
      source: "billing",
      payload: payload("c1")
    }])
  })

  it("calls the given fetch as a plain function (a browser's fetch refuses to be called as a method)", async () => {
    const s = await serve((r) => FaultServer.accepted(r))
    const receivers: Array<unknown> = []
    const c = client(s.url, {
      fetch: function(this: unknown, url, init) {
        receivers.push(this)
        return globalThis.fetch(url, init)
      }
    })
    await emitCall(c, "c1")
    expect(receivers).toEqual([undefined])
  })

  it("N emits made together travel as one request, each emit resolving with its own item", async () => {
    const s = await serve((r) => FaultServer.accepted(r, ["call.completed:c3"]))
    const c = client(s.url)
    const results = await Promise.all(["c1", "c2", "c3", "c4", "c5"].map((id) => emitCall(c, id)))
    expect(s.received).toHaveLength(1)
    expect(keysOf(s.received[0]!)).toEqual(["c1", "c2", "c3", "c4", "c5"].map((id) => `call.completed:${id}`))
    expect(results.map((r) => [r.idempotency_key, r.duplicate])).toEqual([
      ["call.completed:c1", false],
      ["call.completed:c2", false],
      ["call.completed:c3", true],
      ["call.completed:c4", false],
      ["call.completed:c5", false]
    ])
  })

  it("a batch is sent as soon as it holds maxEvents events", async () => {
    const s = await serve((r) => FaultServer.accepted(r))
    const c = client(s.url, { batch: { maxEvents: 3, maxDelayMs: 60_000 } })
    const all = Promise.all(Array.from({ length: 7 }, (_, i) => emitCall(c, `c${i}`)))
    await c.flush()
    await all
    expect(s.received.map((r) => r.events.length).sort((a, b) => b - a)).toEqual([3, 3, 1])
  })

  it("flush sends the waiting batch at once and resolves when every emit has settled", async () => {
    const s = await serve((r) => FaultServer.accepted(r))
    const c = client(s.url, { batch: { maxEvents: 1_000, maxDelayMs: 60_000 } })
    const emits = [emitCall(c, "c1"), emitCall(c, "c2")]
    const started = Date.now()
    await c.flush()
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(await Promise.all(emits)).toHaveLength(2)
    expect(s.received).toHaveLength(1)
  })

  it("a batch closes before its body would pass the API's 5 MiB", async () => {
    const s = await serve((r) => FaultServer.accepted(r))
    const c = client(s.url, { batch: { maxEvents: 1_000, maxDelayMs: 60_000 } })
    const text = "x".repeat(2 * 1024 * 1024)
    const all = Promise.all(["n1", "n2", "n3"].map((id) => c.emit(NoteAdded, { text }, { subject: id, idempotency_key: id })))
    await c.flush()
    await all
    expect(s.received.map(keysOf).sort((a, b) => b.length - a.length)).toEqual([["n1", "n2"], ["n3"]])
    for (const r of s.received) expect(new TextEncoder().encode(r.body).length).toBeLessThanOrEqual(5 * 1024 * 1024)
  })

  it("a batch never exceeds 1,000 events, whatever maxEvents says", async () => {
    const s = await serve((r) => FaultServer.accepted(r))
    const c = client(s.url, { batch: { maxEvents: 5_000, maxDelayMs: 60_000 } })
    const all = Promise.all(Array.from({ length: 1_001 }, (_, i) => emitCall(c, `c${i}`)))
    await c.flush()
    await all
    // Two requests in flight at once: they may arrive in either order.
    expect(s.received.map((r) => r.events.length).sort((a, b) => a - b)).toEqual([1, 1_000])
  })
})

describe("retries reuse the same body, so the same idempotency keys", () => {
  it("429 with Retry-After: waits at least that long, then sends the identical body", async () => {
    const s = await serve((r, n) => (n === 0 ? FaultServer.error(429, "rate_limited", "slow down", undefined, { "retry-after": "1" }) : FaultServer.accepted(r)))
    const c = client(s.url)
    const results = await Promise.all([emitCall(c, "c1"), emitCall(c, "c2")])
    expect(results.map((r) => r.duplicate)).toEqual([false, false])
    expect(s.received).toHaveLength(2)
    expect(s.received[1]!.body).toBe(s.received[0]!.body)
    expect(keysOf(s.received[1]!)).toEqual(["call.completed:c1", "call.completed:c2"])
    expect(s.received[1]!.at - s.received[0]!.at).toBeGreaterThanOrEqual(950)
  })

  it("503 after a partial send: the retry carries the same keys, and the emits resolve (the sent one as a duplicate)", async () => {
    const s = await serve((r, n) =>
      n === 0
        ? FaultServer.error(503, "unavailable", "the events queue failed after 1 event(s) were sent; retry the request", { sent: ["call.completed:c1"], not_sent: ["call.completed:c2"] }, { "retry-after": "0" })
        : FaultServer.accepted(r, ["call.completed:c1"]))
    const c = client(s.url)
    const results = await Promise.all([emitCall(c, "c1"), emitCall(c, "c2")])
    expect(s.received).toHaveLength(2)
    expect(s.received[1]!.body).toBe(s.received[0]!.body)
    expect(s.received[1]!.events.map((e) => e.message_id)).toEqual(s.received[0]!.events.map((e) => e.message_id))
    expect(results).toEqual([
      { idempotency_key: "call.completed:c1", duplicate: true },
      { idempotency_key: "call.completed:c2", duplicate: false }
    ])
  })

  it("a delayed emit carries delay_seconds beside its created_at, and its retry sends both unchanged (the delay is not restarted)", async () => {
    const s = await serve((r, n) => (n === 0 ? FaultServer.error(503, "unavailable", "try again", undefined, { "retry-after": "0" }) : FaultServer.accepted(r)))
    const c = client(s.url)
    await c.emit(CallCompleted, payload("c1"), { subject: "c1", idempotency_key: "call.completed:c1", delay_seconds: 90 })
    expect(s.received).toHaveLength(2)
    expect(s.received[1]!.body).toBe(s.received[0]!.body)
    expect(s.received[0]!.events[0]).toMatchObject({ delay_seconds: 90, created_at: expect.any(String) })
  })

  it("a delay outside 0..43,200 seconds is refused before sending, naming delay_seconds", async () => {
    const s = await serve((r) => FaultServer.accepted(r))
    const c = client(s.url)
    for (const delay_seconds of [-1, 43_201, 1.5]) {
      const result = await settle(c.emit(CallCompleted, payload("c1"), { subject: "c1", idempotency_key: "call.completed:c1", delay_seconds }))
      expect(result.ok).toBe(false)
      expect((result as { error: InvalidPayload }).error.problems.map((p) => p.path)).toEqual(["delay_seconds"])
    }
    await c.flush()
    expect(s.received).toHaveLength(0)
  })

  it("a connection reset is retried with the identical body", async () => {
    const s = await serve((r, n) => (n < 2 ? "reset" : FaultServer.accepted(r)))
    const c = client(s.url)
    const emitted = await emitCall(c, "c1")
    expect(emitted.idempotency_key).toBe("call.completed:c1")
    expect(s.received).toHaveLength(3)
    expect(new Set(s.received.map((r) => r.body)).size).toBe(1)
  })

  it("an attempt without an answer in timeoutMs is abandoned and retried with the identical body", async () => {
    const s = await serve((r, n) => (n === 0 ? "hang" : FaultServer.accepted(r)))
    const c = client(s.url, { timeoutMs: 300 })
    expect(await emitCall(c, "c1")).toEqual({ idempotency_key: "call.completed:c1", duplicate: false })
    expect(s.received).toHaveLength(2)
    expect(s.received[1]!.body).toBe(s.received[0]!.body)
  })

  it("after the last attempt every emit of the batch fails with Unavailable (never silently)", async () => {
    const s = await serve(() => FaultServer.error(503, "unavailable", "the idempotency store is unavailable"))
    const c = client(s.url, { retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 5 } })
    const results = await Promise.all([settle(emitCall(c, "c1")), settle(emitCall(c, "c2"))])
    expect(s.received).toHaveLength(3)
    expect(new Set(s.received.map((r) => r.body)).size).toBe(1)
    for (const result of results) {
      expect(result.ok).toBe(false)
      const error = (result as { error: unknown }).error
      expect(error).toBeInstanceOf(Unavailable)
      expect(error).toMatchObject({ _tag: "Unavailable", attempts: 3, status: 503 })
    }
  })

  it("a 4xx other than 429 is not retried: 401 is Unauthorized, 403 Forbidden", async () => {
    for (const [status, code, type] of [[401, "unauthorized", Unauthorized], [403, "forbidden", Forbidden]] as const) {
      const s = await serve(() => FaultServer.error(status, code, "no"))
      const result = await settle(emitCall(client(s.url), "c1"))
      expect(s.received).toHaveLength(1)
      expect(result.ok).toBe(false)
      expect((result as { error: unknown }).error).toBeInstanceOf(type)
      await s.close()
      server = undefined
    }
  })
})

describe("refusals are typed and go to the emit they belong to", () => {
  it("a payload that fails the definition's schema is refused before sending, naming the field", async () => {
    const s = await serve((r) => FaultServer.accepted(r))
    const c = client(s.url)
    const wrongType = await settle(c.emit(CallCompleted, { ...payload("c1"), duration_s: "90" } as any, { subject: "c1", idempotency_key: "k1" }))
    const unknownField = await settle(c.emit(CallCompleted, { ...payload("c2"), colour: "red" } as any, { subject: "c2", idempotency_key: "k2" }))
    const badEnvelope = await settle(c.emit(CallCompleted, payload("c3"), { subject: "", idempotency_key: "k3", created_at: "yesterday" }))
    await c.flush()
    expect(s.received).toHaveLength(0)
    for (const result of [wrongType, unknownField, badEnvelope]) {
      expect(result.ok).toBe(false)
      expect((result as { error: unknown }).error).toBeInstanceOf(InvalidPayload)
    }
    const paths = (result: typeof wrongType) => ((result as { error: InvalidPayload }).error.problems.map((p) => p.path))
    expect(paths(wrongType)).toEqual(["payload.duration_s"])
    expect(paths(unknownField)).toEqual(["payload.colour"])
    expect(paths(badEnvelope).sort()).toEqual(["created_at", "subject"])
    expect((wrongType as { error: InvalidPayload }).error.message).toContain("payload.duration_s")
  })

  it("a 400 fails only the emits its problems name; the others are sent again without them and accepted", async () => {
    const s = await serve((r, n) =>
      n === 0
        ? FaultServer.error(400, "invalid_events", "1 problem(s); nothing was accepted", { problems: [{ path: "events.1.payload.currency", message: "must be an ISO-4217 code, e.g. USD" }] })
        : FaultServer.accepted(r))
    const c = client(s.url)
    const [first, second, third] = await Promise.all(["c1", "c2", "c3"].map((id) => settle(emitCall(c, id))))
    expect(first).toMatchObject({ ok: true, value: { idempotency_key: "call.completed:c1" } })
    expect(third).toMatchObject({ ok: true, value: { idempotency_key: "call.completed:c3" } })
    expect(second!.ok).toBe(false)
    const error = (second as { error: unknown }).error
    expect(error).toBeInstanceOf(InvalidEvents)
    expect(error).toMatchObject({ code: "invalid_events", idempotency_key: "call.completed:c2", problems: [{ path: "payload.currency", message: "must be an ISO-4217 code, e.g. USD" }] })
    expect(s.received.map(keysOf)).toEqual([
      ["call.completed:c1", "call.completed:c2", "call.completed:c3"],
      ["call.completed:c1", "call.completed:c3"]
    ])
    // The resent events are the same envelopes (same message ids, same bytes).
    expect(s.received[1]!.events).toEqual([s.received[0]!.events[0], s.received[0]!.events[2]])
  })

  it("a 400 whose problems name no event fails every emit of the batch with them", async () => {
    const s = await serve(() => FaultServer.error(400, "invalid_request", 'send one envelope object or { "events": [...] }'))
    const c = client(s.url)
    const results = await Promise.all(["c1", "c2"].map((id) => settle(emitCall(c, id))))
    expect(s.received).toHaveLength(1)
    for (const result of results) expect((result as { error: unknown }).error).toMatchObject({ _tag: "InvalidEvents", code: "invalid_request" })
  })

  it("a 422 idempotency conflict fails the conflicting emit only", async () => {
    const s = await serve((r, n) =>
      n === 0
        ? FaultServer.error(422, "idempotency_conflict", "1 idempotency key(s) carry another payload", [{ idempotency_key: "call.completed:c2", reason: "accepted_before", paths: ["events.1.idempotency_key"] }])
        : FaultServer.accepted(r))
    const c = client(s.url)
    const results = await Promise.all(["c1", "c2"].map((id) => settle(emitCall(c, id))))
    expect(results[0]).toMatchObject({ ok: true })
    expect((results[1] as { error: unknown }).error).toBeInstanceOf(IdempotencyConflict)
    expect((results[1] as { error: unknown }).error).toMatchObject({ idempotency_key: "call.completed:c2", reason: "accepted_before" })
    expect(s.received.map(keysOf)).toEqual([["call.completed:c1", "call.completed:c2"], ["call.completed:c1"]])
  })
})

describe("reading", () => {
  const fact = (sequence: number, type: string, data: Record<string, unknown>) => ({
    fact_id: `f_${sequence}`, tenant_id: "tenant-a", stream: "c1", sequence, type, data,
    causation_id: "call.completed:c1", correlation_id: "call.completed:c1", caused_by: "test", created_at: "2026-11-22T10:00:00.000Z"
  })

  it("a stream's facts, filtered to the definitions asked for, page after page with `after`", async () => {
    const facts = [
      fact(1, "outcome", payload("c1")),
      fact(2, "qualification", { call_id: "c1", qualified: true }),
      fact(3, "charge", { call_id: "c1", buyer_id: "buyer_1", amount_cents: 300, currency: "USD" })
    ]
    const s = await serve((r) => {
      const url = new URL(r.url, "http://x")
      const after = Number(url.searchParams.get("after") ?? 0)
      const page = facts.filter((f) => f.sequence > after).slice(0, 2)
      const last = page.at(-1)!.sequence
      return { status: 200, body: { subject: "c1", version: 3, facts: page, next_after: last < 3 ? last : null } }
    })
    const c = client(s.url)
    const types: Array<string> = []
    let charged = 0
    for await (const f of c.streamFacts("c1", { types: [Outcome, Charge], limit: 2 })) {
      types.push(f.type)
      if (f.type === "charge") charged += f.data.amount_cents
    }
    expect(types).toEqual(["outcome", "charge"])
    expect(charged).toBe(300)
    expect(s.received.map((r) => r.url)).toEqual(["/v1/streams/c1/facts?limit=2", "/v1/streams/c1/facts?after=2&limit=2"])
    const page = await c.readStream("c1")
    expect(page.facts.map((f) => f.type)).toEqual(["outcome", "qualification"])
    expect((await c.readStream("c1", { types: [] })).facts).toHaveLength(2)
  })

  it("a projection's rows, with filters and cursor paging", async () => {
    const s = await serve((r) => {
      const url = new URL(r.url, "http://x")
      return url.searchParams.get("cursor") === null
        ? { status: 200, body: { projection: "calls", data: [{ call_id: "c1", buyer_id: "buyer_1", qualified: true, charged_cents: 300 }], next_cursor: "abc" } }
        : { status: 200, body: { projection: "calls", data: [{ call_id: "c2", buyer_id: "buyer_1", qualified: true, charged_cents: 0 }], next_cursor: null } }
    })
    const c = client(s.url)
    const rows = []
    for await (const row of c.projectionRows(callsProjection, { where: { buyer_id: "buyer_1", qualified: true }, limit: 1 })) rows.push(row)
    expect(rows.map((r) => r.call_id)).toEqual(["c1", "c2"])
    // In the order the description's query schema encodes them: its own parameters, then the filters.
    expect(s.received.map((r) => r.url)).toEqual([
      "/v1/projections/calls?limit=1&buyer_id=buyer_1&qualified=true",
      "/v1/projections/calls?cursor=abc&limit=1&buyer_id=buyer_1&qualified=true"
    ])
  })

  it("a read's 404 is NotFound and its 400 is InvalidQuery with the problems; 503 is retried", async () => {
    const s = await serve((r, n) => {
      if (n === 0) return FaultServer.error(503, "unavailable", "the ledger is unavailable, retry later", undefined, { "retry-after": "0" })
      if (r.url.startsWith("/v1/streams/")) return FaultServer.error(404, "not_found", 'no stream "nope" for this tenant')
      return FaultServer.error(400, "invalid_query", "duration_s: not a queryable column", { problems: [{ path: "duration_s", message: "not a queryable column of calls" }] })
    })
    const c = client(s.url)
    const missing = await settle(c.readStream("nope"))
    expect((missing as { error: unknown }).error).toBeInstanceOf(NotFound)
    const invalid = await settle(c.readProjection("calls", { where: { duration_s: 90 } }))
    expect((invalid as { error: unknown }).error).toBeInstanceOf(InvalidQuery)
    expect((invalid as { error: unknown }).error).toMatchObject({ problems: [{ path: "duration_s", message: "not a queryable column of calls" }] })
    expect(s.received).toHaveLength(3)
  })
})
