/**
 * The auth and tenancy sweep (issue 8, fault suite), generated from the API's
 * route table (`Api.routes`): every route of the table is served (the table is
 * the description the app serves) and nothing else is — and then, for every route:
 * no token or an invalid one → 401; a token lacking the route's scope → 403;
 * tenant B's token on tenant A's resources → 403 / 404 (or, for a listing, an
 * empty page) with nothing of A's in the body, while A's own token reads them.
 */
import { env } from "cloudflare:workers"
import { beforeAll, describe, expect, it } from "vitest"
import { Api, Auth } from "@factline/workers"
import { callCompleted, eventually, postEvents, readStream, request, tokenA, tokenAReadOnly, tokenB, tokenPlatform, unique } from "./helpers.js"

const keyOf = (route: { readonly method: string; readonly path: string }) => `${route.method} ${route.path}`

/** The dev tokens with their tenant and scopes, as FACTLINE_TOKENS configures them (by hash). */
const devTokens = async () => {
  const table = Auth.principals(env.FACTLINE_TOKENS as string)
  return Promise.all([tokenA, tokenB, tokenAReadOnly, tokenPlatform].map(async (token) => ({ token, ...table.get(await Auth.sha256Hex(token))! })))
}

/** A request to a route with its path parameters filled in. */
const call = (route: { readonly method: string; readonly path: string }, params: Record<string, string>, init: { token?: string; body?: unknown; query?: string; contentType?: string } = {}) => {
  const path = route.path.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(params[name] ?? "x")) + (init.query ?? "")
  return request(path, {
    method: route.method,
    token: init.token,
    ...(route.method === "GET" ? {} : { body: JSON.stringify(init.body ?? {}) }),
    ...(init.contentType === undefined ? {} : { headers: { "content-type": init.contentType } })
  })
}

describe("the route table", () => {
  it("is what the app serves: every route of the table is routed, and anything else is a JSON 404 naming it", async () => {
    expect(new Set(Api.routes.map(keyOf)).size).toBe(Api.routes.length)
    for (const route of [...Api.routes, ...Api.publicRoutes]) {
      const response = await call(route, {}, { contentType: "application/json" })
      const body = response.headers.get("content-type")?.includes("json") ? await response.json() as { error?: { message?: string } } : {}
      expect(body.error?.message ?? "", keyOf(route)).not.toMatch(/^no route for/)
    }
    for (const [method, path] of [["GET", "/v1/nope"], ["DELETE", "/v1/events"], ["PATCH", "/v1/facts"], ["GET", "/"]] as const) {
      const response = await request(path, { method, token: tokenA, ...(method === "GET" ? {} : { body: "{}" }) })
      expect(response.status, `${method} ${path}`).toBe(404)
      expect(response.headers.get("x-content-type-options")).toBe("nosniff")
      expect(await response.json()).toEqual({ error: { code: "not_found", message: `no route for ${method} ${path}` } })
    }
  })
})

describe("auth sweep, every route of the table", () => {
  it("without a token, or with an unknown one: 401 with a JSON error and a Bearer challenge", async () => {
    for (const route of Api.routes) {
      for (const token of [undefined, "not-a-real-token"]) {
        const response = await call(route, {}, { token })
        expect(response.status, `${keyOf(route)} with ${token ?? "no token"}`).toBe(401)
        expect(response.headers.get("www-authenticate")).toBe("Bearer")
        expect(response.headers.get("cache-control")).toBe("no-store")
        const text = await response.text()
        expect(JSON.parse(text).error.code).toBe("unauthorized")
        if (token) expect(text).not.toContain(token)
      }
    }
  })

  it("with a token lacking the route's scope: 403; with one holding it: past authorization", async () => {
    const tokens = await devTokens()
    for (const route of Api.routes) {
      const lacking = tokens.filter((t) => !t.scopes.some((s) => (route.scopes as ReadonlyArray<string>).includes(s)))
      expect(lacking.length, `a dev token lacks ${route.scopes.join("/")} for ${keyOf(route)}`).toBeGreaterThan(0)
      for (const { token } of lacking) {
        const response = await call(route, {}, { token })
        expect(response.status, `${keyOf(route)} with a token lacking ${route.scopes.join("/")}`).toBe(403)
        expect((await response.json<any>()).error.code).toBe("forbidden")
      }
      // A holder of the scope is not refused by authorization (the request itself may still be a 4xx).
      const holder = tokens.find((t) => t.scopes.some((s) => (route.scopes as ReadonlyArray<string>).includes(s)))!
      const response = await call(route, {}, { token: holder.token, body: route.method === "POST" ? { nothing: true } : undefined })
      expect([401, 403], `${keyOf(route)} with a token holding ${route.scopes.join("/")}`).not.toContain(response.status)
      expect(response.status).toBeLessThan(500)
    }
  })
})

describe("tenancy sweep, every route of the table", () => {
  /** Tenant A's resources, and the strings that would betray them. */
  const a = {
    subject: "",
    buyer: unique("secret_buyer"),
    price: 7_319,
    factIds: [] as Array<string>,
    batch: unique("rb_tenant_a"),
    job: unique("bt_tenant_a"),
    endpoint: "",
    hookPath: `/hooks/${unique("secret_hook")}`,
    deadLetter: unique("dlq_tenant_a"),
    run: unique("run_tenant_a"),
    workflow: unique("crm-sync-tenant-a")
  }

  beforeAll(async () => {
    const event = callCompleted({}, { buyer_id: a.buyer, duration_s: 95, price_cents: a.price })
    a.subject = event.subject
    expect((await postEvents(event, tokenA)).status).toBe(202)
    await eventually(async () => {
      const body = await (await request(`/v1/projections/buyer_budgets?buyer_id=${a.buyer}`, { token: tokenA })).json<any>()
      return body.data?.length === 1 ? true : undefined
    }, 40_000, "tenant A's budget")
    await eventually(async () => ((await readStream("tenant-a", a.subject)).facts.length === 3 ? true : undefined), 40_000, "tenant A's facts")
    a.factIds = (await readStream("tenant-a", a.subject)).facts.map((f) => f.fact_id)
    await env.DB.prepare(
      `INSERT INTO projection_rebuilds (id, tenant_id, projection, shadow_table, status, shards_total, shards_done, facts_replayed, started_at)
       VALUES (?, 'tenant-a', 'calls', ?, 'failed', 0, 0, 0, ?)`
    ).bind(a.batch, `calls__${a.batch}`, new Date().toISOString()).run()
    await env.DB.prepare(
      `INSERT INTO batch_jobs (id, tenant_id, operation, status, params, created_at, updated_at) VALUES (?, 'tenant-a', 'import', 'failed', '{}', ?, ?)`
    ).bind(a.job, new Date().toISOString(), new Date().toISOString()).run()
    const endpoint = await (await request("/v1/webhooks/endpoints", {
      method: "POST", token: tokenA, body: JSON.stringify({ url: `https://hooks.example.com${a.hookPath}`, event_types: ["charge.created"] })
    })).json<any>()
    a.endpoint = endpoint.id
    await env.DB.prepare(
      `INSERT INTO dead_messages (id, queue, reason, last_error, attempts, first_attempted_at, last_attempted_at, tenant_id, message_type, idempotency_key, subject, original_message, status, received_at)
       VALUES (?, 'factline-events', 'permanent_failure', ?, 1, ?, ?, 'tenant-a', 'call.completed', ?, ?, '{}', 'open', ?)`
    ).bind(a.deadLetter, `bug for ${a.buyer}`, new Date().toISOString(), new Date().toISOString(), `call.completed:${a.subject}`, a.subject, new Date().toISOString()).run()
    await env.DB.prepare(
      `INSERT INTO runs (id, queue, message_id, tenant_id, message_type, subject, idempotency_key, attempt, attempts, outcome, error, next_retry_at, body, first_attempted_at, updated_at)
       VALUES (?, 'factline-events', ?, 'tenant-a', 'call.completed', ?, ?, 1, 1, 'retry', ?, ?, '{}', ?, ?)`
    ).bind(a.run, unique("msg"), a.subject, `call.completed:${a.subject}`, `retrying for ${a.buyer}`, new Date(Date.now() + 60_000).toISOString(), new Date().toISOString(), new Date().toISOString()).run()
    // An instance of tenant A's in the index (Cloudflare does not know it: its show says so with a null status).
    await env.DB.prepare(
      `INSERT INTO workflow_instances (tenant_id, instance_id, workflow, subject, start_fact_id, status, step, attempts, waiting_for, wait_until, facts, error, traceparent, started_at, updated_at)
       VALUES ('tenant-a', ?, 'crm-sync', ?, ?, 'waiting', 'wait/dispute', 1, ?, ?, '[]', NULL, NULL, ?, ?)`
    ).bind(a.workflow, a.subject, a.factIds[0] ?? "f_probe", `dispute of ${a.buyer}`, new Date(Date.now() + 60_000).toISOString(), new Date().toISOString(), new Date().toISOString()).run()
  }, 60_000)

  interface Probe {
    readonly params?: Record<string, string>
    readonly query?: string
    readonly body?: unknown
    /** The body's media type, when not JSON. */
    readonly contentType?: string
    /** A's own token gets this status on the same request (the probe targets a real resource); undefined when A cannot call the route. */
    readonly ownerStatus: number | undefined
    /** What A's 200 shows of A's resource (default: A's subject, buyer or batch). */
    readonly ownMarkers?: ReadonlyArray<string>
    /** B may get a 2xx here: the route answers with B's own data or shared data (the catalog) — never A's. */
    readonly answersB?: boolean
  }

  /** One probe per route of the table, aimed at tenant A's resources; a route without one fails the sweep. */
  const probes = (): Record<string, Probe> => ({
    "POST /v1/events": { body: callCompleted({ tenant_id: "tenant-a" }, { buyer_id: a.buyer }), ownerStatus: 202 },
    "GET /v1/streams/:subject/facts": { params: { subject: a.subject }, ownerStatus: 200 },
    "GET /v1/facts": { query: `?subject=${encodeURIComponent(a.subject)}`, ownerStatus: 200 },
    "GET /v1/facts/:fact_id/trace": { params: { fact_id: a.factIds[0]! }, query: `?subject=${encodeURIComponent(a.subject)}`, ownerStatus: 200 },
    "GET /v1/projections/:name": { params: { name: "buyer_budgets" }, query: `?buyer_id=${encodeURIComponent(a.buyer)}`, ownerStatus: 200 },
    // No tenant's token may start a rebuild (it spans every tenant): nothing of A's to reach.
    "POST /v1/batches": { body: { operation: "rebuild", projection: "calls" }, ownerStatus: undefined },
    "GET /v1/batches/:id": { params: { id: a.batch }, ownerStatus: 200 },
    "GET /v1/batches": { ownerStatus: 200, answersB: true },
    // A's job is finished (failed): A's own cancel is a 409, B's the 404 of an unknown id.
    "POST /v1/batches/:id/cancel": { params: { id: a.job }, ownerStatus: 409, ownMarkers: [a.job] },
    // A's job has no output (it failed): A's read is a 409, B's the 404 of an unknown id.
    "GET /v1/batches/:id/output": { params: { id: a.job }, ownerStatus: 409, ownMarkers: [a.job] },
    // B uploads under its own tenant's prefix: nothing of A's in the answer (A's own upload is not sent: it changes nothing A reads).
    "PUT /v1/uploads/:name": { params: { name: "probe.ndjson" }, body: { probe: true }, contentType: "application/x-ndjson", ownerStatus: undefined, answersB: true },
    "GET /v1/webhooks/event-types": { ownerStatus: 200, ownMarkers: ["charge.created"], answersB: true },
    // B creates its own endpoint: nothing of A's in the answer.
    "POST /v1/webhooks/endpoints": { body: { url: "https://hooks.example.com/b", event_types: ["charge.created"] }, ownerStatus: undefined, answersB: true },
    "GET /v1/webhooks/endpoints": { ownerStatus: 200, ownMarkers: [a.endpoint], answersB: true },
    "GET /v1/webhooks/endpoints/:id": { params: { id: a.endpoint }, ownerStatus: 200, ownMarkers: [a.hookPath] },
    "PATCH /v1/webhooks/endpoints/:id": { params: { id: a.endpoint }, body: { description: "changed by its owner" }, ownerStatus: 200, ownMarkers: [a.hookPath] },
    "POST /v1/webhooks/endpoints/:id/rotate-secret": { params: { id: a.endpoint }, ownerStatus: 200, ownMarkers: [a.hookPath] },
    "GET /v1/webhooks/endpoints/:id/attempts": { params: { id: a.endpoint }, ownerStatus: 200, ownMarkers: ['"data"'] },
    "POST /v1/webhooks/endpoints/:id/recover": { params: { id: a.endpoint }, body: { since: "2026-01-01T00:00:00Z" }, ownerStatus: 202, ownMarkers: ['"recovered"'] },
    // A's own DELETE is not sent: it would remove the endpoint the other probes read.
    "DELETE /v1/webhooks/endpoints/:id": { params: { id: a.endpoint }, ownerStatus: undefined },
    "GET /v1/dlq": { ownerStatus: 200, ownMarkers: [a.deadLetter], answersB: true },
    // B's bulk replay only finds B's records (none); A's would replay A's record, which later probes read.
    "POST /v1/dlq/replay": { ownerStatus: undefined, answersB: true },
    "GET /v1/dlq/:id": { params: { id: a.deadLetter }, ownerStatus: 200, ownMarkers: [a.deadLetter] },
    "POST /v1/dlq/:id/replay": { params: { id: a.deadLetter }, ownerStatus: undefined },
    "POST /v1/dlq/:id/skip": { params: { id: a.deadLetter }, body: { reason: "probe" }, ownerStatus: undefined },
    "POST /v1/dlq/:id/escalate": { params: { id: a.deadLetter }, body: { note: "probe" }, ownerStatus: undefined },
    "GET /v1/queues/health": { ownerStatus: undefined },
    // Recovery walks every tenant's shards: platform scope, every tenant's token is refused.
    "POST /v1/recover": { body: { since: "2026-01-01T00:00:00Z", dry_run: true }, ownerStatus: undefined },
    "GET /v1/runs": { ownerStatus: 200, ownMarkers: [a.run], answersB: true },
    // A's own retry is not sent: it would send A's stored body to the queue.
    "POST /v1/runs/:id/retry": { params: { id: a.run }, ownerStatus: undefined },
    "GET /v1/workflows": { ownerStatus: 200, ownMarkers: [a.workflow], answersB: true },
    "GET /v1/workflows/:id": { params: { id: a.workflow }, ownerStatus: 200, ownMarkers: [a.workflow] },
    // A's own terminate and retry are not sent: Cloudflare does not know the probe's instance (a 404 either way).
    "POST /v1/workflows/:id/terminate": { params: { id: a.workflow }, ownerStatus: undefined },
    "POST /v1/workflows/:id/retry": { params: { id: a.workflow }, ownerStatus: undefined },
    // The projections' catch-up spans every tenant: platform scope, every tenant's token is refused.
    "GET /v1/projections": { ownerStatus: undefined },
    "POST /v1/projections/catch-up": { ownerStatus: undefined },
    // B learns its own placement only.
    "GET /v1/tenants/me": { ownerStatus: 200, ownMarkers: ['"read_database"'], answersB: true },
    // Platform scope: every tenant's token is refused.
    "GET /v1/tenants": { ownerStatus: undefined },
    "PUT /v1/tenants/:tenant/placement": { params: { tenant: "tenant-a" }, body: { read_database: 0 }, ownerStatus: undefined },
    "DELETE /v1/tenants/:tenant/placement": { params: { tenant: "tenant-a" }, ownerStatus: undefined },
    "POST /v1/tenants/:tenant/moves": { params: { tenant: "tenant-a" }, body: { to_database: 1 }, ownerStatus: undefined },
    "GET /v1/tenants/:tenant/moves/:move_id": { params: { tenant: "tenant-a", move_id: "mv_probe" }, ownerStatus: undefined },
    "DELETE /v1/tenants/:tenant": { params: { tenant: "tenant-a" }, ownerStatus: undefined },
    "GET /v1/tenants/:tenant/deletion": { params: { tenant: "tenant-a" }, ownerStatus: undefined },
    "POST /v1/tenants/:tenant/ledger/reshard": { params: { tenant: "tenant-a" }, body: { shards: 32 }, ownerStatus: undefined },
    "GET /v1/tenants/:tenant/ledger/reshard": { params: { tenant: "tenant-a" }, ownerStatus: undefined },
    // B erases, reads and exports the data subject id in its own tenant: nothing of A's (A's own erase is not sent: it
    // would erase the buyer the other probes read).
    "POST /v1/subjects/:subject/erase": { params: { subject: a.buyer }, ownerStatus: undefined, answersB: true },
    "GET /v1/subjects/:subject/erasure": { params: { subject: a.buyer }, ownerStatus: 404, answersB: true },
    "GET /v1/subjects/:subject/export": { params: { subject: a.buyer }, ownerStatus: 200, ownMarkers: [a.subject], answersB: true },
    // Operator alerts, platform scope: every tenant's token is refused (a tenant holds no alert endpoint to reach).
    "GET /v1/alerts": { ownerStatus: undefined },
    "POST /v1/alerts/evaluate": { ownerStatus: undefined },
    "POST /v1/alerts/endpoints": { body: { url: "https://hooks.example.com/b", event_types: ["factline.health.changed"] }, ownerStatus: undefined },
    "GET /v1/alerts/endpoints": { ownerStatus: undefined },
    "GET /v1/alerts/endpoints/:id": { params: { id: a.endpoint }, ownerStatus: undefined },
    "PATCH /v1/alerts/endpoints/:id": { params: { id: a.endpoint }, body: { description: "probe" }, ownerStatus: undefined },
    "DELETE /v1/alerts/endpoints/:id": { params: { id: a.endpoint }, ownerStatus: undefined },
    "POST /v1/alerts/endpoints/:id/rotate-secret": { params: { id: a.endpoint }, ownerStatus: undefined },
    "GET /v1/alerts/endpoints/:id/attempts": { params: { id: a.endpoint }, ownerStatus: undefined }
  })

  it("tenant B's token on tenant A's resources: 403 or 404 (an empty page for a listing), nothing of A's in the body", async () => {
    const all = probes()
    for (const route of Api.routes) {
      const probe = all[keyOf(route)]
      expect(probe, `a tenancy probe for ${keyOf(route)}`).toBeDefined()
      const asB = await call(route, probe!.params ?? {}, { token: tokenB, query: probe!.query, body: probe!.body, contentType: probe!.contentType })
      const text = await asB.text()
      const body = JSON.parse(text)
      const emptyPage = asB.status === 200 && Array.isArray(body.data) && body.data.length === 0
      const ownAnswer = probe!.answersB === true && asB.status >= 200 && asB.status < 300
      expect(asB.status === 403 || asB.status === 404 || emptyPage || ownAnswer, `${keyOf(route)} as tenant B: ${asB.status} ${text.slice(0, 200)}`).toBe(true)
      // Nothing of A's: strip what B itself sent (echoed names), then look for A's data.
      const sent = [...Object.values(probe!.params ?? {}), ...(probe!.query ? [decodeURIComponent(probe!.query.split("=")[1]!)] : []), ...(probe!.body ? [JSON.stringify(probe!.body)] : [])]
      let rest = text
      for (const s of sent) rest = rest.split(s).join("")
      for (const secret of ["tenant-a", a.buyer, a.subject, String(a.price), a.batch, a.job, a.endpoint, a.hookPath, a.deadLetter, a.workflow, ...a.factIds]) {
        expect(rest, `${keyOf(route)} as tenant B leaks ${secret}`).not.toContain(secret)
      }
      if (probe!.ownerStatus !== undefined) {
        const asA = await call(route, probe!.params ?? {}, { token: tokenA, query: probe!.query, body: probe!.body, contentType: probe!.contentType })
        expect(asA.status, `${keyOf(route)} as tenant A`).toBe(probe!.ownerStatus)
        if (asA.status === 200) {
          const own = await asA.text()
          expect((probe!.ownMarkers ?? [a.subject, a.buyer, a.batch]).some((s) => own.includes(s)), `${keyOf(route)} as tenant A shows A's resource`).toBe(true)
        }
      }
    }
  })
})
