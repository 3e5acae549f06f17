/**
 * GET /openapi.json and /docs: the OpenAPI 3.1 document is generated from the route descriptions, and it
 * documents exactly the routes the Worker serves — none missing, none extra — with each one's scopes and
 * query parameters. (Its validity against the OpenAPI 3.1 schema, and every response against its documented
 * schema, are checked in Node by scripts/contract.mjs; the page renders in Chromium in scripts/browser.mjs.)
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Api } from "@factline/workers"
import { request, tokenA, tokenPlatform, unique } from "./helpers.js"

const methods = ["get", "post", "put", "patch", "delete"]

describe("OpenAPI", () => {
  it("is public, OpenAPI 3.1, and lists exactly the routes the app serves (method and path)", async () => {
    const response = await request("/openapi.json")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toContain("application/json")
    const doc = await response.json<any>()
    expect(doc.openapi).toBe("3.1.0")
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
      Object.keys(item).filter((k) => methods.includes(k)).map((method) => `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`)
    )
    // The table of the description the Worker serves (routes.workers.test checks each of them is routed).
    const served = [...Api.routes, ...Api.publicRoutes].map((r) => `${r.method} ${r.path}`)
    expect(new Set(documented).size).toBe(documented.length)
    expect([...documented].sort()).toEqual([...new Set(served)].sort())
  })

  it("the documents are public, cacheable for 5 minutes and readable from other origins; a query parameter is a 400 naming it", async () => {
    for (const path of ["/openapi.json", "/asyncapi.json"]) {
      const response = await request(path)
      expect(response.status, path).toBe(200)
      expect(response.headers.get("content-type"), path).toBe("application/json; charset=utf-8")
      expect(response.headers.get("cache-control"), path).toBe("public, max-age=300")
      expect(response.headers.get("access-control-allow-origin"), path).toBe("*")
      expect(response.headers.get("x-content-type-options"), path).toBe("nosniff")
      expect(typeof (await response.json<any>()).info.title, path).toBe("string")
      const refused = await request(`${path}?format=yaml`)
      expect(refused.status, path).toBe(400)
      expect((await refused.json<any>()).error).toMatchObject({ code: "invalid_query", details: { problems: [{ path: "format" }] } })
    }
  })

  it("states each route's scopes as its bearer requirement, the 401/403/429 of every authenticated route, and the one error shape", async () => {
    const doc = await (await request("/openapi.json")).json<any>()
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" })
    for (const route of Api.routes) {
      const op = doc.paths[route.path.replace(/:(\w+)/g, "{$1}")][route.method.toLowerCase()]
      expect(op.security, `${route.method} ${route.path}`).toEqual([{ bearer: [...route.scopes] }])
      for (const status of ["401", "403", "429"]) expect(op.responses[status].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Problem" })
      expect(op.responses["429"].headers["retry-after"].schema, `${route.method} ${route.path} 429`).toEqual({ type: "integer", minimum: 1 })
      for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
        if (Number(status) >= 400) expect(response.content["application/json"].schema, `${route.method} ${route.path} ${status}`).toEqual({ $ref: "#/components/schemas/Problem" })
      }
      expect(op.summary, `${route.method} ${route.path} has a summary`).toBeTruthy()
    }
    for (const route of Api.publicRoutes) expect(doc.paths[route.path].get.security).toEqual([])
    expect(doc.components.schemas.Problem.required).toEqual(["error"])
  })

  it("documents the query parameters each route accepts, and the route refuses any other (a 400 naming it)", async () => {
    const doc = await (await request("/openapi.json")).json<any>()
    const op = (path: string) => doc.paths[path].get
    const names = (path: string) => op(path).parameters.filter((p: any) => p.in === "query").map((p: any) => p.name).sort()
    expect(names("/v1/streams/{subject}/facts")).toEqual(["after", "limit"])
    expect(names("/v1/dlq")).toEqual(["cursor", "limit", "queue", "reason", "status", "type"])
    expect(names("/v1/facts/{fact_id}/trace")).toEqual(["subject"])
    // A fact id alone is enough to trace it (issue 21, defect 9): subject is optional.
    expect(op("/v1/facts/{fact_id}/trace").parameters.find((p: any) => p.name === "subject").required).not.toBe(true)
    const refused = await request("/v1/streams/x/facts?limt=10", { token: tokenA })
    expect(refused.status).toBe(400)
    expect((await refused.json<any>()).error.details.problems).toEqual([{ path: "limt", message: "unknown query parameter (known: after, limit)" }])
  })
})

describe("query values checked against the description", () => {
  it("an enumerated, numeric or required query parameter out of its schema is a 400 naming it, before the handler runs", async () => {
    const problemsOf = async (path: string, token = tokenA) => {
      const response = await request(path, { token })
      expect(response.status, path).toBe(400)
      const body = await response.json<any>()
      expect(body.error.code).toBe("invalid_query")
      return body.error.details.problems
    }
    expect(await problemsOf("/v1/queues/health?window=2d", tokenPlatform)).toEqual([{ path: "window", message: "must be one of 15m, 1h, 6h, 24h" }])
    expect(await problemsOf("/v1/streams/x/facts?limit=ten&after=-1")).toEqual([
      { path: "after", message: "must be a whole number" },
      { path: "limit", message: "must be a whole number from 1 to 1000" }
    ])
    // A sequence beyond what the ledger holds (2^53 - 1) is refused by the schema, as the handler once did by hand.
    expect(await problemsOf(`/v1/streams/x/facts?after=${Number.MAX_SAFE_INTEGER + 1}`)).toEqual([{ path: "after", message: `must be at most ${Number.MAX_SAFE_INTEGER}` }])
    expect(await problemsOf("/v1/facts/f_x/trace?subject=")).toEqual([{ path: "subject", message: "must not be empty" }])
    expect(await problemsOf("/v1/facts?subject=")).toEqual([{ path: "subject", message: "must not be empty" }])
    expect(await problemsOf("/v1/dlq?status=gone")).toEqual([{ path: "status", message: "must be one of open, replaying, replayed, skipped, escalated" }])
    // The document states the same constraints.
    const doc = await (await request("/openapi.json")).json<any>()
    const window = doc.paths["/v1/queues/health"].get.parameters.find((p: any) => p.name === "window")
    expect(JSON.stringify(window.schema)).toContain("24h")
  })
})

describe("what the document says is what the server does", () => {
  const limitOf = (doc: any, path: string) => doc.paths[path].get.parameters.find((p: any) => p.name === "limit").schema
  const problemsOf = async (response: Response) => (await response.json<any>()).error.details.problems

  it("every listing's `limit`: the document's maximum is accepted, one more is a 400 naming limit", async () => {
    const doc = await (await request("/openapi.json")).json<any>()
    const listings = Object.entries(doc.paths as Record<string, any>).filter(([, item]) => item.get?.parameters?.some((p: any) => p.name === "limit"))
    expect(listings.map(([path]) => path).sort()).toEqual([
      "/v1/alerts/endpoints", "/v1/alerts/endpoints/{id}/attempts",
      "/v1/batches", "/v1/dlq", "/v1/facts", "/v1/projections/{name}", "/v1/runs", "/v1/streams/{subject}/facts", "/v1/webhooks/endpoints", "/v1/webhooks/endpoints/{id}/attempts", "/v1/workflows"
    ])
    for (const [path] of listings) {
      const { type, minimum, maximum, default: fallback } = limitOf(doc, path)
      expect({ path, type, minimum }).toEqual({ path, type: "integer", minimum: 1 })
      expect(fallback, path).toBeGreaterThanOrEqual(1)
      expect(fallback, path).toBeLessThanOrEqual(maximum)
      const url = (limit: number) => `${path.replace("{name}", "calls").replace(/\{\w+\}/g, "x")}?limit=${limit}`
      const token = doc.paths[path].get["x-factline-scopes"].includes("read") || doc.paths[path].get["x-factline-scopes"].includes("admin") ? tokenA : tokenPlatform
      const atMaximum = await request(url(maximum), { token })
      expect({ path, status: atMaximum.status }).not.toEqual({ path, status: 400 })
      expect(atMaximum.status, path).toBeLessThan(500)
      for (const refused of [maximum + 1, 0]) {
        const response = await request(url(refused), { token })
        expect({ path, limit: refused, status: response.status }).toEqual({ path, limit: refused, status: 400 })
        expect(await problemsOf(response)).toEqual([{ path: "limit", message: `must be a whole number from 1 to ${maximum}` }])
      }
    }
  })

  it("GET /v1/facts and /v1/projections/:name: without a limit, a page of the documented default; with the maximum, every row", async () => {
    const doc = await (await request("/openapi.json")).json<any>()
    // A type of its own, so the copy's listing of that type (no subject: the D1 copy) holds exactly these rows.
    const subject = unique("paged")
    const buyer = unique("paged_buyer")
    const rows = limitOf(doc, "/v1/facts").default + 10
    expect(limitOf(doc, "/v1/projections/{name}").default + 10).toBe(rows)
    await env.DB.batch(Array.from({ length: rows }, (_, i) =>
      env.DB.prepare("INSERT INTO facts (tenant_id, fact_id, stream, sequence, type, body, causation_id, correlation_id, caused_by, created_at) VALUES ('tenant-a', ?, ?, ?, ?, '{}', 'k', 'c', 'test', ?)")
        .bind(`f_${subject}_${i}`, subject, i + 1, subject, new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString())))
    await env.DB.batch(Array.from({ length: rows }, (_, i) =>
      env.DB.prepare("INSERT INTO calls (tenant_id, call_id, buyer_id, qualified) VALUES ('tenant-a', ?, ?, 1)").bind(`${buyer}_call_${i}`, buyer)))
    for (const [path, list] of [["/v1/facts", `/v1/facts?type=${subject}`], ["/v1/projections/{name}", `/v1/projections/calls?buyer_id=${buyer}`]] as const) {
      const { default: fallback, maximum } = limitOf(doc, path)
      const page = await (await request(list, { token: tokenA })).json<any>()
      expect({ path, rows: page.data.length }).toEqual({ path, rows: fallback })
      expect(page.next_cursor).toEqual(expect.any(String))
      const all = await (await request(`${list}&limit=${maximum}`, { token: tokenA })).json<any>()
      expect({ path, rows: all.data.length, next_cursor: all.next_cursor }).toEqual({ path, rows, next_cursor: null })
    }
  })

  it("GET /v1/facts is documented oldest first across streams (the copy) and in stream order within one, and answers so", async () => {
    const doc = await (await request("/openapi.json")).json<any>()
    expect(doc.paths["/v1/facts"].get.description).toMatch(/Without `subject`: oldest first \(by `created_at`, then `fact_id`\)/)
    expect(doc.paths["/v1/facts"].get.description).toMatch(/With `subject`: that stream's facts from the ledger, in stream order \(by `sequence`\)/)
    expect(doc.paths["/v1/facts"].get.description).not.toMatch(/newest/i)
    const subject = unique("ordered")
    // Stored out of order: the answer is in time order whatever the insertion order (a type of its own: the copy's listing of it).
    const at = ["2026-03-01T00:00:02.000Z", "2026-03-01T00:00:00.000Z", "2026-03-01T00:00:01.000Z", "2026-03-01T00:00:01.000Z"]
    await env.DB.batch(at.map((createdAt, i) =>
      env.DB.prepare("INSERT INTO facts (tenant_id, fact_id, stream, sequence, type, body, causation_id, correlation_id, caused_by, created_at) VALUES ('tenant-a', ?, ?, ?, ?, '{}', 'k', 'c', 'test', ?)")
        .bind(`f_${subject}_${"dcab"[i]}`, subject, i + 1, subject, createdAt)))
    const first = await (await request(`/v1/facts?type=${subject}&limit=2`, { token: tokenA })).json<any>()
    const rest = await (await request(`/v1/facts?type=${subject}&limit=2&cursor=${first.next_cursor}`, { token: tokenA })).json<any>()
    expect([...first.data, ...rest.data].map((f: any) => [f.created_at, f.fact_id])).toEqual([
      ["2026-03-01T00:00:00.000Z", `f_${subject}_c`],
      ["2026-03-01T00:00:01.000Z", `f_${subject}_a`],
      ["2026-03-01T00:00:01.000Z", `f_${subject}_b`],
      ["2026-03-01T00:00:02.000Z", `f_${subject}_d`]
    ])
  })
})

describe("/docs", () => {
  it("is a static HTML page that loads Scalar and its start-up script from this origin, pointed at /openapi.json, under a CSP allowing nothing else", async () => {
    const response = await request("/docs")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toContain("text/html")
    expect(response.headers.get("x-frame-options")).toBe("DENY")
    expect(response.headers.get("cache-control")).toBe("no-store")
    const csp = response.headers.get("content-security-policy")!
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("script-src 'self';")
    expect(csp).toContain("frame-ancestors 'none'")
    expect(csp).not.toMatch(/'unsafe-eval'|https?:/)
    const html = await response.text()
    expect([...html.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)].map((m) => [m[0].replace(m[1]!, ""), m[1]])).toEqual([
      ['<script src="/static/scalar/standalone.js"></script>', ""],
      ['<script src="/static/docs.js"></script>', ""]
    ])
    expect(html).not.toMatch(/\b(src|href)=["']?(https?:|\/\/)/)
    // Both scripts are files of the same assets: Scalar's bundle (megabytes, not in the Worker) and the start-up.
    const scalar = await env.ASSETS.fetch(new Request("http://factline.test/static/scalar/standalone.js"))
    expect(scalar.status).toBe(200)
    expect(scalar.headers.get("content-type")).toMatch(/javascript/)
    expect((await scalar.arrayBuffer()).byteLength).toBeGreaterThan(1_000_000)
    const start = await (await env.ASSETS.fetch(new Request("http://factline.test/static/docs.js"))).text()
    expect(start).toContain("/openapi.json")
    expect(start).toContain("createApiReference")
  })
})
