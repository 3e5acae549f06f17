/**
 * The HTTP edge against a hostile or unlucky client (issue 8): idempotency
 * conflicts and replays, duplicate keys in one request, ambiguous CloudEvents
 * keys, invalid text, client-set payload refs, body limits, partial sends.
 */
import { env, exports } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, readStream, request, tokenA, tokenB, tokenPlatform, unique } from "./helpers.js"
import { platform } from "./worker.js"
import { AcceptedKeys } from "@factline/core/runtime"

const bump = (subject: string, by: string, key = unique("bump")) => ({
  schema_version: 1, message_type: "test.counter.bump", idempotency_key: key, subject, payload: { by }
})

const storedKey = (tenant: string, key: string) =>
  env.DB.prepare("SELECT * FROM accepted_keys WHERE tenant_id = ? AND idempotency_key = ?").bind(tenant, key).first<Record<string, string>>()

/** The real events queue behind a wrapper that counts messages and fails the `failOn`-th sendBatch call (1-based). */
const events = (failOn?: number) => {
  const sent: Array<number> = []
  const queue = {
    send: (body: unknown, options?: QueueSendOptions) => env.EVENTS_QUEUE.send(body, options),
    sendBatch: async (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
      const list = [...messages]
      if (sent.length + 1 === failOn) throw new Error("queue down")
      sent.push(list.length)
      return env.EVENTS_QUEUE.sendBatch(list, options)
    }
  } as Queue
  const post = (body: unknown, token = tokenA) =>
    platform.fetch(
      new Request("http://factline.test/v1/events", {
        method: "POST", body: JSON.stringify(body), headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }
      }),
      { ...env, EVENTS_QUEUE: queue } as never,
      { waitUntil: () => undefined, passThroughOnException: () => undefined } as never
    )
  return { post, sent }
}

const rawPost = (path: string, body: BodyInit, headers: Record<string, string> = {}) =>
  exports.default.fetch(new Request(`http://factline.test${path}`, {
    method: "POST", body, headers: { authorization: `Bearer ${tokenA}`, "content-type": "application/json", ...headers }
  }))

const streamOf = (chunk: Uint8Array, times: number) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      for (let i = 0; i < times; i++) controller.enqueue(chunk)
      controller.close()
    }
  })

describe("HTTP edge: one idempotency key, one payload", () => {
  it("a key posted again with the same payload is a 202 replay marked duplicate; with another payload or subject a 422 naming the key", async () => {
    const event = callCompleted()
    const first = await postEvents(event)
    expect(first.status).toBe(202)
    expect(first.headers.get("idempotent-replay")).toBeNull()
    expect(await first.json()).toEqual({
      accepted: 1, idempotency_keys: [event.idempotency_key], items: [{ idempotency_key: event.idempotency_key, duplicate: false }]
    })
    expect(await storedKey("tenant-a", event.idempotency_key)).toMatchObject({
      message_type: "call.completed", subject: event.subject, payload_hash: expect.stringMatching(/^[0-9a-f]{64}$/)
    })

    // A retry: new message_id, created_at and correlation_id are metadata, not the payload.
    const again = await postEvents({ ...event, message_id: unique("msg"), created_at: new Date().toISOString(), correlation_id: unique("corr") })
    expect(again.status).toBe(202)
    expect(again.headers.get("idempotent-replay")).toBe("true")
    expect((await again.json<any>()).items).toEqual([{ idempotency_key: event.idempotency_key, duplicate: true }])

    for (const changed of [{ ...event, payload: { ...event.payload, price_cents: 999 } }, { ...event, subject: unique("call") }]) {
      const refused = await postEvents(changed)
      expect(refused.status).toBe(422)
      const { error } = await refused.json<any>()
      expect(error.code).toBe("idempotency_conflict")
      expect(error.message).toContain(event.idempotency_key)
      expect(error.details).toEqual([{ idempotency_key: event.idempotency_key, reason: "accepted_before", paths: ["idempotency_key"] }])
    }
    // The first payload is what the ledger holds.
    await drain()
    const stream = await readStream("tenant-a", event.subject)
    expect(stream.facts.filter((f) => f.type === "outcome").map((f) => f.data.price_cents)).toEqual([250])
  })

  it("a request with one conflicting key accepts nothing and records none of its other keys", async () => {
    const accepted = bump(unique("s"), "a")
    expect((await postEvents(accepted)).status).toBe(202)
    const fresh = bump(unique("s"), "b")
    const { post, sent } = events()
    const refused = await post({ events: [fresh, { ...accepted, payload: { by: "changed" } }] })
    expect(refused.status).toBe(422)
    const { error } = await refused.json<any>()
    expect(error.details.map((d: any) => d.idempotency_key)).toEqual([accepted.idempotency_key])
    expect(error.details[0].paths).toEqual(["events.1.idempotency_key"])
    expect(sent).toEqual([])
    expect(await storedKey("tenant-a", fresh.idempotency_key)).toBeNull()
    // So the fresh key is still free for any payload.
    expect((await postEvents({ ...fresh, payload: { by: "other" } })).status).toBe(202)
  })

  it("keys are per tenant: tenant B may use tenant A's key for another payload", async () => {
    const key = unique("shared-key")
    expect((await postEvents(bump(unique("s"), "a", key))).status).toBe(202)
    const asB = await postEvents({ ...bump(unique("s"), "b", key), tenant_id: "tenant-b" }, tokenB)
    expect(asB.status).toBe(202)
    expect((await asB.json<any>()).items[0].duplicate).toBe(false)
  })

  it("a request whose send failed can be retried with the same payload, and its events arrive", async () => {
    const event = bump(unique("s"), "x")
    const failing = events(1)
    const down = await failing.post(event)
    expect(down.status).toBe(503)
    expect((await down.json<any>()).error).toMatchObject({ code: "unavailable", details: { sent: [], not_sent: [event.idempotency_key] } })
    const retry = await postEvents(event)
    expect(retry.status).toBe(202)
    await drain()
    expect((await readStream("tenant-a", event.subject)).version).toBe(1)
  })
})

describe("HTTP edge: the accepted-keys check scales with the request, not the tenant's history", () => {
  it("each key of a request is one primary-key search; the tenant's stored keys are never scanned", async () => {
    const keys = JSON.stringify([["k", "h", "t", "s"]])
    const plan = async (sql: string, params: ReadonlyArray<string>) =>
      (await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>()).results.map((r) => r.detail)
    for (const detail of [
      ...(await plan(AcceptedKeys.selectStored, ["tenant-a", keys])),
      ...(await plan(AcceptedKeys.insertUnlessConflict, ["tenant-a", keys, keys, new Date().toISOString()]))
    ]) {
      if (/accepted_keys/.test(detail)) expect(detail).toMatch(/SEARCH .* \(tenant_id=\? AND idempotency_key=\?\)/)
    }
  })
})

describe("HTTP edge: the same key twice in one request", () => {
  it("identical copies are collapsed: 202, later copies marked duplicate, sent once", async () => {
    const event = bump(unique("s"), "x")
    const { post, sent } = events()
    const response = await post({ events: [event, { ...event, message_id: unique("msg") }, bump(unique("s"), "y")] })
    expect(response.status).toBe(202)
    expect(response.headers.get("idempotent-replay")).toBeNull()
    const body = await response.json<any>()
    expect(body.accepted).toBe(3)
    expect(body.items.map((i: any) => i.duplicate)).toEqual([false, true, false])
    expect(sent).toEqual([2])
  })

  it("differing copies are a 422 naming the key and both positions; nothing is sent", async () => {
    const event = bump(unique("s"), "x")
    const { post, sent } = events()
    const response = await post({ events: [event, bump(unique("s"), "ok"), { ...event, payload: { by: "y" } }] })
    expect(response.status).toBe(422)
    const { error } = await response.json<any>()
    expect(error.code).toBe("idempotency_conflict")
    expect(error.details).toEqual([{ idempotency_key: event.idempotency_key, reason: "within_request", paths: ["events.0.idempotency_key", "events.2.idempotency_key"] }])
    expect(sent).toEqual([])
  })
})

describe("HTTP edge: CloudEvents keys", () => {
  it("source and id are encoded unambiguously: /billing + x/1 and /billing/x + 1 are two events", async () => {
    const [s1, s2] = [unique("ce"), unique("ce")]
    const id = unique("x")
    const ce = (source: string, eventId: string, subject: string) => ({
      specversion: "1.0", type: "test.counter.bump", id: eventId, source, subject, data: { by: source }
    })
    const post = (body: unknown) =>
      request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify(body), headers: { "content-type": "application/cloudevents+json" } })
    const first = await post(ce("/billing", `${id}/1`, s1))
    const second = await post(ce(`/billing/${id}`, "1", s2))
    expect(first.status).toBe(202)
    expect(second.status).toBe(202)
    const k1 = (await first.json<any>()).idempotency_keys[0]
    const k2 = (await second.json<any>()).idempotency_keys[0]
    expect(k1).toBe(`ce:%2Fbilling:${id}%2F1`)
    expect(k2).toBe(`ce:%2Fbilling%2F${id}:1`)
    await drain()
    for (const subject of [s1, s2]) expect((await readStream("tenant-a", subject)).version).toBe(1)
  })
})

describe("HTTP edge: text must be valid Unicode", () => {
  it("a body with invalid UTF-8 is a 400 naming the field", async () => {
    const event = bump(unique("s"), "x")
    const [before, after] = JSON.stringify({ ...event, subject: "SUBJECT" }).split("SUBJECT")
    const bytes = new Uint8Array([...new TextEncoder().encode(before), 0x61, 0xff, 0xfe, 0x62, ...new TextEncoder().encode(after)])
    const response = await rawPost("/v1/events", bytes)
    expect(response.status).toBe(400)
    const { error } = await response.json<any>()
    expect(error.code).toBe("invalid_utf8")
    expect(error.details.problems.map((p: any) => p.path)).toEqual(["subject"])
    expect(await storedKey("tenant-a", event.idempotency_key)).toBeNull()
  })

  it("a lone surrogate in a string is a 400 naming the field", async () => {
    const event = bump(unique("s"), "x")
    const body = JSON.stringify({ events: [event, { ...bump(unique("s"), "y"), idempotency_key: `k\ud800` }] })
    expect(body).toContain("\\ud800")
    const response = await rawPost("/v1/events", body)
    expect(response.status).toBe(400)
    const { error } = await response.json<any>()
    expect(error.code).toBe("invalid_string")
    expect(error.details.problems.map((p: any) => p.path)).toEqual(["events.1.idempotency_key"])
    expect(await storedKey("tenant-a", event.idempotency_key)).toBeNull()
  })
})

describe("HTTP edge: payload refs belong to the producer", () => {
  it("a client-set payload_ref is a 400 naming the field", async () => {
    const { payload: _, ...event } = bump(unique("s"), "x")
    const response = await postEvents({ events: [bump(unique("s"), "ok"), { ...event, payload_ref: "r2://factline-payloads/tenant-a/whatever" }] })
    expect(response.status).toBe(400)
    const { error } = await response.json<any>()
    expect(error.code).toBe("invalid_events")
    expect(error.details.problems.map((p: any) => p.path)).toEqual(["events.1.payload_ref"])
  })

  it("two large payloads sent under one message_id are stored apart: a reused message_id overwrites nothing", async () => {
    const message_id = unique("reused")
    const [s1, s2] = [unique("blob"), unique("blob")]
    const blob = (c: string) => c.repeat(70 * 1024)
    for (const [subject, c] of [[s1, "a"], [s2, "b"]] as const) {
      const response = await postEvents({
        schema_version: 1, message_type: "test.blob.stored", idempotency_key: unique("k"), message_id, subject, payload: { blob: blob(c) }
      })
      expect(response.status).toBe(202)
    }
    await drain()
    for (const [subject, c] of [[s1, "a"], [s2, "b"]] as const) {
      const stream = await readStream("tenant-a", subject)
      expect(stream.facts.map((f) => f.data.blob === blob(c))).toEqual([true])
    }
  })
})

describe("HTTP edge: body limits", () => {
  it("a chunked body over 5 MiB is a 413, counted in bytes while streaming", async () => {
    // "é" is 2 bytes but 1 UTF-16 unit: 3 chunks of 1 Mi "é" are 6 MiB of bytes but 3 Mi UTF-16 units.
    const chunk = new TextEncoder().encode("é".repeat(1024 * 1024))
    const response = await rawPost("/v1/events", streamOf(chunk, 3))
    expect(response.status).toBe(413)
    expect((await response.json<any>()).error.code).toBe("payload_too_large")
  })

  it("POST /v1/batches has the same limit", async () => {
    const chunk = new TextEncoder().encode(" ".repeat(1024 * 1024))
    const response = await rawPost("/v1/batches", streamOf(chunk, 6), { authorization: `Bearer ${tokenPlatform}` })
    expect(response.status).toBe(413)
    expect((await response.json<any>()).error.code).toBe("payload_too_large")
  })
})

describe("HTTP edge: partial sends", () => {
  it("when a later sendBatch fails, the 503 lists the keys already sent; a retry sends the rest", async () => {
    const subject = unique("partial")
    const list = Array.from({ length: 150 }, (_, i) => bump(subject, `u${i}`))
    const failing = events(2)
    const response = await failing.post({ events: list })
    expect(response.status).toBe(503)
    const { error } = await response.json<any>()
    expect(error.code).toBe("unavailable")
    expect(error.details.sent).toEqual(list.slice(0, 100).map((e) => e.idempotency_key))
    expect(error.details.not_sent).toEqual(list.slice(100).map((e) => e.idempotency_key))
    expect(failing.sent).toEqual([100])

    const retry = await postEvents({ events: list })
    expect(retry.status).toBe(202)
    await drain()
    expect((await readStream("tenant-a", subject)).version).toBe(150)
  })
})

describe("HTTP edge: content types, query strings, caching", () => {
  it("a body that is not JSON by its content type is a 415 and nothing is accepted", async () => {
    for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "text/plain; charset=utf-8"]) {
      const event = callCompleted()
      const response = await rawPost("/v1/events", JSON.stringify(event), { "content-type": contentType })
      expect(response.status, contentType).toBe(415)
      expect((await response.json<any>()).error.code).toBe("unsupported_media_type")
      expect(await storedKey("tenant-a", event.idempotency_key)).toBeNull()
    }
    const withCharset = callCompleted()
    expect((await rawPost("/v1/events", JSON.stringify(withCharset), { "content-type": "application/json; charset=utf-8" })).status).toBe(202)
  })

  it("an unknown query parameter on a stream read is a 400 naming it", async () => {
    const response = await request("/v1/streams/some_call/facts?after=0&limt=10", { token: tokenA })
    expect(response.status).toBe(400)
    const error = (await response.json<any>()).error
    expect(error.code).toBe("invalid_query")
    expect(error.details.problems.map((p: any) => p.path)).toEqual(["limt"])
  })

  it("a query parameter given twice is a 400 naming it, on every read route", async () => {
    for (const path of ["/v1/streams/some_call/facts?limit=1&limit=1000", "/v1/facts?limit=1&limit=500", "/v1/projections/calls?limit=1&limit=500"]) {
      const response = await request(path, { token: tokenA })
      expect(response.status, path).toBe(400)
      const error = (await response.json<any>()).error
      expect(error.code).toBe("invalid_query")
      expect(error.details.problems.map((p: any) => p.path)).toEqual(["limit"])
    }
  })

  it("every authenticated response says cache-control: no-store, errors included", async () => {
    const responses = [
      await request("/v1/facts?limit=1", { token: tokenA }),
      await request("/v1/projections/calls?limit=1", { token: tokenA }),
      await request(`/v1/streams/${unique("none")}/facts`, { token: tokenA }),
      await postEvents(callCompleted()),
      await request("/v1/facts", { token: "not-a-token" }),
      await request("/v1/facts?bad=1", { token: tokenA })
    ]
    expect(responses.map((r) => r.status)).toEqual([200, 200, 404, 202, 401, 400])
    for (const response of responses) expect(response.headers.get("cache-control")).toBe("no-store")
  })
})
