/**
 * GET /openapi.json and /docs: the OpenAPI 3.1 document is generated from the route descriptions, and it
 * documents exactly the routes the Worker serves — none missing, none extra — with each one's scopes and
 * query parameters. (Its validity against the OpenAPI 3.1 schema, and every response against its documented
 * schema, are checked in Node by scripts/contract.mjs; the page renders in Chromium in scripts/browser.mjs.)
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Api } from "@factline/workers"
import { request, tokenA, tokenPlatform } from "./helpers.js"
import { platform } from "./worker.js"

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
    const served = Api.make(platform.registry, platform.runtime).routes.map((r) => `${r.method} ${r.path}`)
    expect(new Set(documented).size).toBe(documented.length)
    expect([...documented].sort()).toEqual([...new Set(served)].sort())
  })

  it("states each route's scopes as its bearer requirement, the 401/403 of every authenticated route, and the one error shape", async () => {
    const doc = await (await request("/openapi.json")).json<any>()
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" })
    for (const route of Api.routes) {
      const op = doc.paths[route.path.replace(/:(\w+)/g, "{$1}")][route.method.toLowerCase()]
      expect(op.security, `${route.method} ${route.path}`).toEqual([{ bearer: [...route.scopes] }])
      for (const status of ["401", "403"]) expect(op.responses[status].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Problem" })
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
    expect(op("/v1/facts/{fact_id}/trace").parameters.find((p: any) => p.name === "subject").required).toBe(true)
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
      { path: "limit", message: "must be a whole number" }
    ])
    expect(await problemsOf("/v1/facts/f_x/trace?subject=")).toEqual([{ path: "subject", message: "is required" }])
    expect(await problemsOf("/v1/dlq?status=gone")).toEqual([{ path: "status", message: "must be one of open, replaying, replayed, skipped, escalated" }])
    // The document states the same constraints.
    const doc = await (await request("/openapi.json")).json<any>()
    const window = doc.paths["/v1/queues/health"].get.parameters.find((p: any) => p.name === "window")
    expect(JSON.stringify(window.schema)).toContain("24h")
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
