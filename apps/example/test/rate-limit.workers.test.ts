/**
 * Per-tenant rate limits at the HTTP edge (seed 000, issue 21 item 13), through the local Rate Limiting
 * bindings. vitest.config.ts binds two small tiers (`FACTLINE_RATE_LIMIT_TEST_TIGHT`: 3 requests per 10 s,
 * `…_TEST_RAISED`: 6); this file lays `FACTLINE_RATE_LIMIT_TIERS` over the Worker's env (test/worker.ts's
 * `overrideSettings`) with the tight tier as every tenant's default and the raised one as one tenant's
 * override, and adds tokens for tenants of its own, so no other test's tenant is counted here.
 *
 * Locally a limiter's windows are whole 10 s of the wall clock: each test starts early in a window so that its
 * handful of requests fall in one.
 */
import { createExecutionContext } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Auth } from "@factline/workers"
import { drain } from "./Drain.js"
import { callCompleted, readStream, request, unique } from "./helpers.js"
import { overrideSettings, platform } from "./worker.js"

const tight = 3
const raised = 6

interface Tenant {
  readonly id: string
  readonly token: string
}

/** A tenant of this file's own, with an `events:write`, `read` and `admin` token. */
const newTenant = (): Tenant => ({ id: unique("rl"), token: unique("rl-token") })
const [limited, neighbour, overridden, untouched] = [newTenant(), newTenant(), newTenant(), newTenant()]

beforeAll(async () => {
  const tokens = JSON.parse(env.FACTLINE_TOKENS as string) as Array<unknown>
  for (const t of [limited, neighbour, overridden, untouched]) {
    tokens.push({ sha256: await Auth.sha256Hex(t.token), tenant_id: t.id, scopes: ["events:write", "read", "admin"], name: t.id })
  }
  overrideSettings({
    FACTLINE_TOKENS: JSON.stringify(tokens),
    // Every tenant on the tight tier, but one on the raised tier.
    FACTLINE_RATE_LIMIT_TIERS: JSON.stringify({ "*": "test_tight", [overridden.id]: "test_raised" })
  })
})
afterAll(() => overrideSettings(undefined))

/** Waits, if needed, until the current 10 s window has at least 6 s left. */
const freshWindow = async () => {
  const into = Date.now() % 10_000
  if (into > 4_000) await new Promise((r) => setTimeout(r, 10_000 - into + 100))
}

const post = (tenant: Tenant, event: Record<string, unknown> = callCompleted({ tenant_id: tenant.id })) =>
  request("/v1/events", { method: "POST", token: tenant.token, body: JSON.stringify(event) })
const read = (tenant: Tenant) => request("/v1/facts?limit=1", { token: tenant.token })

const expectLimited = async (response: Response) => {
  expect(response.status).toBe(429)
  expect(response.headers.get("retry-after")).toBe("10")
  expect(response.headers.get("content-type")).toContain("application/json")
  expect(response.headers.get("cache-control")).toBe("no-store")
  const body = await response.json<any>()
  expect(body).toEqual({ error: { code: "rate_limited", message: expect.stringMatching(/over its request rate .*retry after 10 s/) } })
}

describe("per-tenant rate limits at the edge", () => {
  it("a tenant over its limit gets 429 with Retry-After and a Problem, on writes and reads; another tenant and GET /health are unaffected", async () => {
    await freshWindow()
    for (let i = 0; i < tight; i++) expect((await post(limited)).status).toBe(202)
    await expectLimited(await post(limited))
    // Reads count against the same budget: the tenant's reads load the same database as its writes.
    await expectLimited(await read(limited))

    // Another tenant on the same tier has its own count.
    for (let i = 0; i < tight - 1; i++) expect((await post(neighbour)).status).toBe(202)
    expect((await read(neighbour)).status).toBe(200)
    // Liveness is public and never counted.
    for (let i = 0; i < 5; i++) expect((await request("/health")).status).toBe(200)
    // A request without a valid token is refused before any tenant is counted.
    expect((await request("/v1/facts", { token: "not-a-token" })).status).toBe(401)
  })

  it("a per-tenant override raises its tenant's limit above the default's", async () => {
    await freshWindow()
    const answers: Array<number> = []
    for (let i = 0; i < raised + 1; i++) answers.push((await post(overridden)).status)
    // The default tier stops at 3; the override lets 6 through, then refuses.
    expect(answers).toEqual([...Array.from({ length: raised }, () => 202), 429])
  })

  it("a tier whose binding is not bound, or a limiter that fails, lets requests through: a limiter outage is not an API outage", async () => {
    const tokens = JSON.parse(env.FACTLINE_TOKENS as string) as Array<unknown>
    tokens.push({ sha256: await Auth.sha256Hex(limited.token), tenant_id: limited.id, scopes: ["read"] })
    const through = async (bindings: Record<string, unknown>) => {
      const answers: Array<number> = []
      for (let i = 0; i < tight + 2; i++) {
        const response = await platform.fetch(new Request("http://factline.test/v1/facts?limit=1", { headers: { authorization: `Bearer ${limited.token}` } }), { ...env, FACTLINE_TOKENS: JSON.stringify(tokens), ...bindings } as never, createExecutionContext())
        answers.push(response.status)
      }
      return answers
    }
    const allowed = Array.from({ length: tight + 2 }, () => 200)
    expect(await through({ FACTLINE_RATE_LIMIT_TIERS: JSON.stringify({ "*": "test_missing" }) })).toEqual(allowed)
    const failing = { limit: async () => { throw new Error("rate limiter unavailable") } }
    expect(await through({ FACTLINE_RATE_LIMIT_TIERS: JSON.stringify({ "*": "test_tight" }), FACTLINE_RATE_LIMIT_TEST_TIGHT: failing })).toEqual(allowed)
    // `unlimited` counts nothing, by design.
    expect(await through({ FACTLINE_RATE_LIMIT_TIERS: JSON.stringify({ [limited.id]: "unlimited" }), FACTLINE_RATE_LIMIT: failing })).toEqual(allowed)
  })

  it("nothing of a 429'd request is accepted: no key claimed, no event enqueued, its body not read; after Retry-After it is accepted as new", async () => {
    await freshWindow()
    for (let i = 0; i < tight; i++) expect((await read(untouched)).status).toBe(200)
    const event = callCompleted({ tenant_id: untouched.id })
    const refused = await post(untouched, event)
    await expectLimited(refused)
    // Counted before the body is read: even a body that is not JSON is answered 429, not 400.
    await expectLimited(await request("/v1/events", { method: "POST", token: untouched.token, body: "{ not json" }))

    await drain()
    const claimed = await env.DB.prepare("SELECT * FROM accepted_keys WHERE tenant_id = ? AND idempotency_key = ?").bind(untouched.id, event.idempotency_key).first()
    expect(claimed).toBeNull()
    expect((await readStream(untouched.id, event.subject as string)).version).toBe(0)

    // Retry-After is honest: once it has passed, the same event is accepted — as new, its key never claimed.
    await new Promise((r) => setTimeout(r, Number(refused.headers.get("retry-after")) * 1000))
    const accepted = await post(untouched, event)
    expect(accepted.status).toBe(202)
    expect((await accepted.json<any>()).items).toEqual([{ idempotency_key: event.idempotency_key, duplicate: false }])
    await drain()
    // Once: the handler's outcome and the processor's qualification and charge (75 s, qualified).
    expect((await readStream(untouched.id, event.subject as string)).facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])
  })
})
