/**
 * Hostile input (issue 8, fault suite): SQL-ish and odd values in every path
 * parameter, filter, cursor and paging parameter of every GET route of the
 * route table, and deeply nested JSON bodies on every POST route. Never a 5xx;
 * the body is always the JSON error shape (or a page) and never carries SQL
 * text, a stack trace or internal names — the caller's own value echoed back
 * in a message is allowed, anything else is not.
 */
import { createExecutionContext } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Api, type PlatformEnv } from "@factline/workers"
import { callCompleted, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { platform } from "./worker.js"

const hostile = [
  "' OR 1=1 --",
  "\"; DROP TABLE facts; --",
  "%",
  "_",
  "\\",
  "\u0000",
  "a\u0000b",
  "') UNION SELECT * FROM accepted_keys --",
  "../../../etc/passwd",
  "-1",
  "99999999999999999999999999",
  "1e400",
  "NaN",
  "[]",
  "{\"$gt\":\"\"}",
  "😀\u202e",
  "x".repeat(10_000),
  "' OR '1'='1".repeat(2_000)
]

/** What must never appear in a response body (after removing the caller's own value). */
const leaks = [
  /sqlite/i, /D1_/, /SQL/, /syntax error/i, /no such (table|column)/i, /\bSELECT\b/i, /\bINSERT\b/i, /\bUPDATE\b/, /\bDELETE\b/, /\bDROP\b/i,
  /json_each|json_extract/, /\bat [\w.<>]+ \(/, /\.(ts|js):\d+/, /\b(TypeError|RangeError|ReferenceError|SyntaxError)\b/, /stack/i,
  /projection_rebuilds|projection_applied|accepted_keys|ledger_shards|ledger_tenants|dead_messages/, /LedgerShard|FiberFailure|Effect\./, /undefined|\[object Object\]/
]

const check = async (response: Response, what: string, sent: ReadonlyArray<string>) => {
  const text = await response.text()
  expect(response.status, `${what}: ${response.status} ${text.slice(0, 300)}`).toBeLessThan(500)
  let body: any
  expect(() => (body = JSON.parse(text)), `${what}: a JSON body`).not.toThrow()
  if (response.status >= 400) expect(typeof body.error?.code, `${what}: the error shape`).toBe("string")
  let rest = text
  for (const value of sent) {
    for (const form of [JSON.stringify(value).slice(1, -1), value]) if (form.length > 0) rest = rest.split(form).join("")
  }
  for (const pattern of leaks) expect(rest, `${what} leaks ${pattern}`).not.toMatch(pattern)
  return { status: response.status, body }
}

/** Query parameters each GET route reads (a route missing here fails the sweep). */
const queryOf: Record<string, ReadonlyArray<string>> = {
  "GET /v1/streams/:subject/facts": ["after", "limit"],
  "GET /v1/facts": ["subject", "type", "cursor", "limit"],
  "GET /v1/facts/:fact_id/trace": ["subject"],
  "GET /v1/projections": [],
  "GET /v1/projections/:name": ["call_id", "buyer_id", "duration_s", "cursor", "limit"],
  "GET /v1/batches/:id": [],
  "GET /v1/batches/:id/output": [],
  "GET /v1/batches": ["status", "cursor", "limit"],
  "GET /v1/webhooks/event-types": [],
  "GET /v1/webhooks/endpoints": [],
  "GET /v1/webhooks/endpoints/:id": [],
  "GET /v1/webhooks/endpoints/:id/attempts": ["limit", "cursor"],
  "GET /v1/dlq": ["queue", "status", "type", "reason", "cursor", "limit"],
  "GET /v1/dlq/:id": [],
  "GET /v1/runs": ["queue", "type", "outcome", "subject", "since", "cursor", "limit"],
  "GET /v1/workflows": ["workflow", "status", "subject", "cursor", "limit"],
  "GET /v1/workflows/:id": [],
  "GET /v1/queues/health": ["window"],
  "GET /v1/tenants/me": [],
  "GET /v1/tenants": [],
  "GET /v1/tenants/:tenant/moves/:move_id": [],
  "GET /v1/tenants/:tenant/deletion": [],
  "GET /v1/tenants/:tenant/ledger/reshard": [],
  "GET /v1/subjects/:subject/erasure": [],
  "GET /v1/subjects/:subject/export": [],
  "GET /v1/alerts": [],
  "GET /v1/alerts/endpoints": ["limit", "cursor"],
  "GET /v1/alerts/endpoints/:id": [],
  "GET /v1/alerts/endpoints/:id/attempts": ["limit", "cursor"]
}
/** A valid value per path parameter, used while another parameter carries the hostile one. */
const validParam: Record<string, string> = { subject: "call_1", name: "calls", id: "rb_x", fact_id: "f_x", tenant: "tenant-a", move_id: "mv_x" }

const tokenFor = (route: Api.Route) => ((route.scopes as ReadonlyArray<string>).includes("platform") && !(route.scopes as ReadonlyArray<string>).includes("read") && !(route.scopes as ReadonlyArray<string>).includes("admin") ? tokenPlatform : tokenA)

describe("hostile input on every GET route", () => {
  const gets = Api.routes.filter((r) => r.method === "GET")

  it("every GET route of the table has its query parameters listed here", () => {
    expect(gets.map((r) => `${r.method} ${r.path}`).sort()).toEqual(Object.keys(queryOf).sort())
  })

  it("SQL-ish, NUL, wildcard, huge and malformed values in every path parameter: never a 5xx, never SQL or internals", async () => {
    for (const route of gets) {
      const names = [...route.path.matchAll(/:(\w+)/g)].map((m) => m[1]!)
      for (const name of names) {
        for (const value of hostile) {
          const path = route.path.replace(/:(\w+)/g, (_, n: string) => encodeURIComponent(n === name ? value : validParam[n]!))
          await check(await request(path, { token: tokenFor(route) }), `${route.path} with ${name}=${JSON.stringify(value.slice(0, 40))}`, [value])
        }
      }
    }
  })

  it("the same values in every filter, cursor and paging parameter (and as parameter names): never a 5xx, never SQL or internals", async () => {
    for (const route of gets) {
      const base = route.path.replace(/:(\w+)/g, (_, n: string) => encodeURIComponent(validParam[n]!))
      for (const name of queryOf[`${route.method} ${route.path}`]!) {
        for (const value of hostile) {
          await check(await request(`${base}?${name}=${encodeURIComponent(value)}`, { token: tokenFor(route) }), `${base} with ${name}=${JSON.stringify(value.slice(0, 40))}`, [value])
        }
      }
      for (const value of hostile.slice(0, 6)) {
        await check(await request(`${base}?${encodeURIComponent(value)}=1`, { token: tokenFor(route) }), `${base} with the parameter name ${JSON.stringify(value)}`, [value])
      }
      if (route.path === "/v1/projections/:name") {
        for (const projection of platform.registry.projections.map((p) => p.name)) {
          for (const value of hostile) {
            await check(await request(`/v1/projections/${projection}?cursor=${encodeURIComponent(value)}&limit=2`, { token: tokenA }), `${projection} cursor ${JSON.stringify(value.slice(0, 40))}`, [value])
          }
        }
      }
    }
  })

  it("a hostile filter value matches nothing and changes nothing: it is a value, not SQL", async () => {
    const { body } = await check(await request(`/v1/projections/calls?buyer_id=${encodeURIComponent("' OR 1=1 --")}`, { token: tokenA }), "calls filtered by ' OR 1=1 --", ["' OR 1=1 --"])
    expect(body.data).toEqual([])
    const facts = await check(await request(`/v1/facts?type=${encodeURIComponent("%")}`, { token: tokenA }), "facts of type %", ["%"])
    expect(facts.body.data).toEqual([])
  })
})

/** `depth` levels of nesting: arrays, objects, or both alternating. */
const nested = (depth: number, kind: "array" | "object" | "mixed") => {
  let open = ""
  let close = ""
  for (let i = 0; i < depth; i++) {
    const array = kind === "array" || (kind === "mixed" && i % 2 === 0)
    open += array ? "[" : "{\"a\":"
    close = (array ? "]" : "}") + close
  }
  return `${open}1${close}`
}

describe("deeply nested JSON bodies on every POST route", () => {
  const posts = Api.routes.filter((r) => r.method === "POST")
  /** POST routes that read no body (their input is the path and query): a body is ignored, never a 5xx. */
  const ignoresBody = new Set(["/v1/dlq/replay", "/v1/alerts/evaluate", "/v1/subjects/:subject/erase"])

  it("10,000 and 100,000 levels, as the body and inside every field an event carries: a 4xx, never a 5xx or internals", async () => {
    for (const depth of [10_000, 100_000]) {
      for (const kind of ["array", "object", "mixed"] as const) {
        const deep = nested(depth, kind)
        const event = callCompleted()
        const bodies = [
          deep,
          `{"events":${deep}}`,
          `{"events":[${deep}]}`,
          JSON.stringify(event).replace(/"payload":\{/, `"payload":{"deep":${deep},`),
          JSON.stringify(event).replace(/"payload":\{.*\}\}$/, `"payload":${deep}}`),
          JSON.stringify(event).replace(/"subject":"[^"]*"/, `"subject":${deep}`),
          JSON.stringify({ operation: "rebuild", projection: "x" }).replace(/"x"/, deep)
        ]
        for (const route of posts) {
          for (const body of bodies) {
            const response = await request(route.path, { method: "POST", token: route.path === "/v1/batches" || route.path.startsWith("/v1/alerts") ? tokenPlatform : tokenA, body })
            const { status } = await check(response, `POST ${route.path} with ${kind} nesting ${depth} deep (${body.slice(0, 30)}…)`, [])
            if (ignoresBody.has(route.path)) expect(status).toBeLessThan(500)
            else expect(status).toBeGreaterThanOrEqual(400)
          }
        }
      }
    }
  }, 120_000)

  it("nesting is refused past 64 levels with a 400 naming the limit, checked before parsing; 64 levels are read", async () => {
    const post = (body: string) => request("/v1/batches", { method: "POST", token: tokenPlatform, body })
    const at = (depth: number) => `{"operation":"rebuild","projection":${nested(depth - 1, "array")}}`
    const within = await check(await post(at(64)), "64 levels", [])
    expect(within.body.error.code).toBe("invalid_request")
    const past = await check(await post(at(65)), "65 levels", [])
    expect(past.status).toBe(400)
    expect(past.body.error).toMatchObject({ code: "too_deep", message: expect.stringContaining("64") })
    // Brackets inside strings are text, not nesting.
    expect((await check(await post(`{"operation":"rebuild","projection":"${"[{".repeat(5_000)}"}`), "brackets in a string", ["[{".repeat(5_000)])).body.error.code).toBe("not_found")
    // A deep body that is not valid UTF-8 either: still a 400, not a 500 while naming the fields.
    const bytes = new TextEncoder().encode(nested(100_000, "object").replace("1", "\"x\""))
    const invalid = new Uint8Array(bytes.length + 1)
    invalid.set(bytes.subarray(0, 10)), invalid.set([0xff], 10), invalid.set(bytes.subarray(10), 11)
    const response = await request("/v1/events", { method: "POST", token: tokenA, body: invalid, headers: { "content-type": "application/json" } })
    expect((await check(response, "deep and not UTF-8", [])).status).toBe(400)
  })

  it("a CloudEvent whose data is nested 10,000 levels deep: a 4xx", async () => {
    const body = `{"specversion":"1.0","type":"call.completed","id":"${unique("ce")}","source":"/x","subject":"s","data":${nested(10_000, "object")}}`
    const response = await request("/v1/events", { method: "POST", token: tokenA, body, headers: { "content-type": "application/cloudevents+json" } })
    const { status } = await check(response, "a deep CloudEvent", [])
    expect(status).toBeGreaterThanOrEqual(400)
  })

  it("hostile strings in every field of an event: validated as values (a 400 or a 202), never a 5xx", async () => {
    for (const value of hostile) {
      for (const field of ["idempotency_key", "subject", "message_type", "message_id", "source", "correlation_id", "created_at"]) {
        const event = { ...callCompleted(), [field]: value }
        await check(await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify(event) }), `an event with ${field}=${JSON.stringify(value.slice(0, 40))}`, [value])
      }
      const withPayload = callCompleted({}, { call_id: value, buyer_id: value })
      await check(await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify({ ...withPayload, subject: value }) }), `a payload of ${JSON.stringify(value.slice(0, 40))}`, [value])
    }
  }, 120_000)
})

describe("CloudEvents binary mode header encoding (issue 21)", () => {
  const data = (call: string) => ({ call_id: call, buyer_id: "ce_hostile", duration_s: 90, price_cents: 150, currency: "USD" })
  const binary = (headers: Record<string, string>, call: string) => request("/v1/events", {
    method: "POST", token: tokenA, body: JSON.stringify(data(call)),
    headers: { "content-type": "application/json", "ce-specversion": "1.0", "ce-type": "call.completed", "ce-source": "/hostile", "ce-subject": call, ...headers }
  })
  const structured = (id: string, call: string) => request("/v1/events", {
    method: "POST", token: tokenA, headers: { "content-type": "application/cloudevents+json" },
    body: JSON.stringify({ specversion: "1.0", type: "call.completed", source: "/hostile", id, subject: call, data: data(call) })
  })

  it("the same event sent structured and binary (percent-encoded id), in either order, is one event: the second a duplicate", async () => {
    for (const order of ["structured first", "binary first"]) {
      const call = unique("ce_pct")
      const id = `evt 1 ${call} ü`
      const encoded = `evt%201%20${call}%20%C3%BC`
      const first = order === "structured first" ? await structured(id, call) : await binary({ "ce-id": encoded }, call)
      const second = order === "structured first" ? await binary({ "ce-id": encoded }, call) : await structured(id, call)
      expect(first.status, order).toBe(202)
      expect(second.status, order).toBe(202)
      const [a, b] = [await first.json<any>(), await second.json<any>()]
      expect(a.items, order).toEqual([{ idempotency_key: `ce:%2Fhostile:${encodeURIComponent(id)}`, duplicate: false }])
      expect(b.items, order).toEqual([{ idempotency_key: `ce:%2Fhostile:${encodeURIComponent(id)}`, duplicate: true }])
    }
  })

  it("refuses ce-* header values that are not valid UTF-8 (workerd hands \\xff and \\xfe alike over as U+FFFD) or not percent-encoded: 400 naming the header, nothing accepted", async () => {
    const call = unique("ce_bytes")
    for (const [header, value] of [["ce-id", "evt-\uFFFD"], ["ce-id", "evt-%FF"], ["ce-id", "evt-%C0%A0"], ["ce-id", "evt-%zz"], ["ce-subject", "a\u00FFb"]] as const) {
      const response = await binary({ "ce-id": `evt-${call}`, [header]: value }, call)
      expect(response.status, `${header}: ${value}`).toBe(400)
      const body = await response.json<any>()
      expect(body.error.code, `${header}: ${value}`).toBe("invalid_events")
      expect(body.error.details.problems, `${header}: ${value}`).toEqual([{ path: `headers.${header}`, message: expect.stringContaining(header) }])
    }
    // Nothing was accepted under the event's key: the same event, well encoded, is new.
    const clean = await binary({ "ce-id": `evt-${call}` }, call)
    expect(clean.status).toBe(202)
    expect((await clean.json<any>()).items[0].duplicate).toBe(false)
  })
})

/** `n` unknown keys as one JSON object's members: `{"k0":0,"k1":0,…}`. */
const unknownKeys = (n: number, extra = "") => `{${extra}${Array.from({ length: n }, (_, i) => `"k${i}":0`).join(",")}}`

describe("problem lists are capped (issue 21, defect 2)", () => {
  /** A 400 that lists the first 100 problems, counts them all, and stays small whatever the input. */
  const capped = async (response: Response, what: string, total: number) => {
    const text = await response.text()
    expect(response.status, `${what}: ${text.slice(0, 300)}`).toBe(400)
    expect(text.length, `${what}: the body's size`).toBeLessThan(64 * 1024)
    const { error } = JSON.parse(text)
    expect(error.details.problems, what).toHaveLength(100)
    expect(error.details.problems_total, what).toBe(total)
    expect(error.message, what).toContain(`${total} problem(s)`)
    expect(error.message, what).toContain("the first 100 are listed")
    return error
  }

  it("an event whose payload has 150,000 unknown keys (a body under 5 MiB): a 400 listing the first 100 of 150,000 problems, not a 500", async () => {
    const event = JSON.stringify(callCompleted())
    const body = event.replace(/"payload":\{/, `"payload":${unknownKeys(150_000).slice(0, -1)},`)
    expect(body.length).toBeLessThan(5 * 1024 * 1024)
    const error = await capped(await request("/v1/events", { method: "POST", token: tokenA, body }), "150,000 unknown payload keys", 150_000)
    expect(error.code).toBe("invalid_events")
    expect(error.details.problems[0].path).toMatch(/^payload\./)
  }, 60_000)

  it("100,000 unknown envelope fields, and 300,000 unknown fields on a webhook endpoint: small 400s with the count", async () => {
    const event = JSON.stringify(callCompleted())
    await capped(await request("/v1/events", { method: "POST", token: tokenA, body: `${event.slice(0, -1)},${unknownKeys(100_000).slice(1)}` }), "100,000 unknown envelope fields", 100_000)
    const endpoint = unknownKeys(300_000, `"url":"https://example.com/hook","event_types":["charge.created"],`)
    await capped(await request("/v1/webhooks/endpoints", { method: "POST", token: tokenA, body: endpoint }), "300,000 unknown endpoint fields", 300_000)
    // One field whose name is 2 MiB long: its path is cut, the body stays small.
    const long = JSON.stringify({ url: "https://example.com/hook", event_types: ["charge.created"], ["f".repeat(2 * 1024 * 1024)]: 1 })
    const response = await request("/v1/webhooks/endpoints", { method: "POST", token: tokenA, body: long })
    expect(response.status).toBe(400)
    expect((await response.text()).length).toBeLessThan(64 * 1024)
  }, 60_000)

  it("every other list of problems: a CloudEvents batch, lone surrogates, unknown query parameters", async () => {
    // 1,000 CloudEvents without id, source and type: 3,000 problems (and the specversion of each).
    const ces = JSON.stringify(Array.from({ length: 1_000 }, () => ({ specversion: "1.0" })))
    await capped(await request("/v1/events", { method: "POST", token: tokenA, body: ces, headers: { "content-type": "application/cloudevents-batch+json" } }), "1,000 empty CloudEvents", 3_000)
    const surrogates = `{"events":[${Array.from({ length: 20_000 }, () => `"\\ud800"`).join(",")}]}`
    await capped(await request("/v1/events", { method: "POST", token: tokenA, body: surrogates }), "20,000 lone surrogates", 20_000)
    const query = Array.from({ length: 500 }, (_, i) => `q${i}=1`).join("&")
    await capped(await request(`/v1/facts?${query}`, { token: tokenA }), "500 unknown query parameters", 500)
  }, 60_000)

  it("a client's payload_ref: refused on /v1/events and never taken from a CloudEvent", async () => {
    const { payload: _, ...event } = callCompleted()
    const ref = "r2://factline-payloads/tenant-a/uploads/p.json"
    const json = await check(await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify({ ...event, payload_ref: ref }) }), "payload_ref", [ref])
    expect(json.body.error.details.problems).toEqual([{ path: "payload_ref", message: expect.stringContaining("is set by the producer only") }])
    // CloudEvents carry data only: a payload_ref (or payloadref) attribute is an ignored extension, so without data the event has no payload.
    for (const attribute of ["payload_ref", "payloadref"]) {
      const ce = { specversion: "1.0", type: "call.completed", id: unique("ce"), source: "/x", subject: "s", [attribute]: ref }
      const { status, body } = await check(await request("/v1/events", { method: "POST", token: tokenA, body: JSON.stringify(ce), headers: { "content-type": "application/cloudevents+json" } }), attribute, [ref])
      expect(status).toBe(400)
      expect(JSON.stringify(body)).not.toContain("uploads/p.json")
    }
  })
})

/** Endpoint URLs the SSRF guard refuses outside local development (issue 21, defect 5), with the rule each 400 names. */
const ssrfForms: ReadonlyArray<readonly [string, RegExp]> = [
  ["https://localtest.me/hook", /loopback names/],
  ["https://127.0.0.1.nip.io/hook", /spell 127\.0\.0\.1/],
  ["https://169.254.169.254.nip.io/latest/meta-data", /spell 169\.254\.169\.254 .*cloud metadata/],
  ["https://10.0.0.1.sslip.io/hook", /spell 10\.0\.0\.1 .*private/],
  ["https://app-10-0-0-1.nip.io/hook", /spell 10\.0\.0\.1/],
  ["https://7f000001.5db8d70e.rbndr.us/hook", /spell 127\.0\.0\.1/],
  ["https://[2002:a9fe:a9fe::1]/hook", /embeds 169\.254\.169\.254 \(6to4/],
  ["https://[::ffff:0:a9fe:a9fe]/hook", /embeds 169\.254\.169\.254 \(IPv4-translated/],
  ["https://[100::a9fe:a9fe]/hook", /discard-only/],
  ["https://[64:ff9b::a9fe:a9fe]/hook", /embeds 169\.254\.169\.254 \(NAT64/],
  ["https://[::a9fe:a9fe]/hook", /embeds 169\.254\.169\.254 \(IPv4-compatible/],
  ["https://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/hook", /Teredo/],
  ["https://192.88.99.1/hook", /6to4 relay anycast/],
  ["https://localhost../hook", /loopback names/],
  ["https://hooks..example.com/hook", /empty label/],
  ["https://hooks.example.com:22/hook", /port 22 is not allowed/],
  ["https://hooks.example.com:6379/hook", /port 6379 is not allowed/],
  ["https://hooks.example.com:0/hook", /port 0 is not allowed/]
]

describe("SSRF guard: names, embedded forms, reserved ranges and ports (issue 21, defect 5)", () => {
  const production = { ...(env as unknown as PlatformEnv), FACTLINE_LOCAL_DEVELOPMENT: "false" } as PlatformEnv
  const post = (url: string) => platform.fetch(new Request("http://factline.test/v1/webhooks/endpoints", {
    method: "POST",
    headers: { authorization: `Bearer ${tokenA}`, "content-type": "application/json" },
    body: JSON.stringify({ url, event_types: ["charge.created"] })
  }), production, createExecutionContext())

  it("each form is a 400 naming the rule on the url field, nothing created", async () => {
    for (const [url, rule] of ssrfForms) {
      const { status, body } = await check(await post(url), url, [url])
      expect(status, url).toBe(400)
      expect(body.error.details.problems, url).toEqual([{ path: "url", message: expect.stringMatching(rule) }])
    }
    const listed = await platform.fetch(new Request("http://factline.test/v1/webhooks/endpoints", { headers: { authorization: `Bearer ${tokenA}` } }), production, createExecutionContext())
    const urls = ((await listed.json()) as { data: Array<{ url: string }> }).data.map((e) => e.url)
    for (const [url] of ssrfForms) expect(urls, url).not.toContain(new URL(url).toString())
  })
})
