/**
 * The operators' dashboard page (GET /dashboard: a static page of @factline/workers' assets, its script and
 * stylesheet files beside it, a CSP that allows only those and this origin, no data in it) and the batch-job
 * list it reads (GET /v1/batches: tenant-scoped, newest first, filtered and paged).
 * The page itself is driven in a real browser by scripts/browser.mjs.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Api } from "@factline/workers"
import { request, tokenA, tokenAReadOnly, tokenB, tokenPlatform, unique } from "./helpers.js"
import { platform } from "./worker.js"

/** A file of the static assets, as Workers Static Assets serves it (the binding the Worker also answers from). */
const asset = (path: string, init?: RequestInit) => env.ASSETS.fetch(new Request(`http://factline.test${path}`, init))

describe("GET /dashboard", () => {
  it("is one HTML page whose only script and stylesheet are its own files, under a CSP that allows nothing else", async () => {
    const response = await request("/dashboard")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8")
    expect(response.headers.get("x-frame-options")).toBe("DENY")
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(response.headers.get("x-content-type-options")).toBe("nosniff")
    expect(response.headers.get("referrer-policy")).toBe("no-referrer")
    expect(response.headers.get("content-security-policy")).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    const page = await response.text()
    // One script, from this origin, and no inline code (the CSP would refuse it anyway).
    expect([...page.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)].map((m) => [m[0].replace(m[1]!, ""), m[1]])).toEqual([['<script defer src="/static/dashboard.js"></script>', ""]])
    expect([...page.matchAll(/<link\b[^>]*rel="stylesheet"[^>]*>/g)].map((m) => m[0])).toEqual(['<link rel="stylesheet" href="/static/dashboard.css">'])
    expect(page).not.toMatch(/<style\b/)
    // Nothing from elsewhere, no inline handlers or style attributes.
    expect(page).not.toMatch(/\b(src|href)=["']?(https?:|\/\/)/)
    expect(page).not.toMatch(/\son[a-z]+=["']/)
    expect(page).not.toMatch(/\sstyle=["']/)
  })

  it("serves its script and stylesheet from the same assets; the script writes values as text only and keeps the token in sessionStorage", async () => {
    const script = await asset("/static/dashboard.js")
    expect(script.status).toBe(200)
    expect(script.headers.get("content-type")).toMatch(/^(text|application)\/javascript/)
    expect(script.headers.get("x-content-type-options")).toBe("nosniff")
    const code = await script.text()
    expect(code).toContain("/v1/queues/health")
    // Data reaches the DOM as text only.
    expect(code).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/)
    expect(code).toContain("sessionStorage")
    expect(code).not.toContain("localStorage")
    const css = await asset("/static/dashboard.css")
    expect(css.status).toBe(200)
    expect(css.headers.get("content-type")).toMatch(/^text\/css/)
  })

  it("is public and holds no data: the same page with or without a token, which it never echoes", async () => {
    const anonymous = await request("/dashboard")
    const signedIn = await request("/dashboard", { token: tokenPlatform })
    expect(signedIn.status).toBe(200)
    expect(await signedIn.text()).toBe(await anonymous.text())
    expect(await (await request("/dashboard", { token: tokenPlatform })).text()).not.toContain(tokenPlatform)
  })

  it("is reachable at /dashboard only: the file's own name redirects there (never served without its headers)", async () => {
    const byFileName = await asset("/dashboard.html", { redirect: "manual" })
    expect(byFileName.status).toBeGreaterThanOrEqual(300)
    expect(byFileName.status).toBeLessThan(400)
    expect(new URL(byFileName.headers.get("location")!, "http://factline.test").pathname).toBe("/dashboard")
    // The headers file configures the assets; it is not one of them.
    expect((await asset("/_headers")).status).toBe(404)
  })

  it("without an ASSETS binding, the Worker answers 404 naming the assets configuration to add", async () => {
    const { ASSETS: _assets, ...withoutAssets } = env as unknown as Record<string, unknown>
    const app = Api.make(platform.runtime)
    for (const path of ["/dashboard", "/docs"]) {
      const response = await app.fetch(new Request(`http://factline.test${path}`), withoutAssets as never)
      expect(response.status, path).toBe(404)
      expect((await response.json<any>()).error).toMatchObject({ code: "not_found", message: expect.stringContaining('"assets": { "directory": "node_modules/@factline/workers/dist/assets", "binding": "ASSETS" }') })
    }
  })
})

describe("GET /v1/batches", () => {
  const insert = (id: string, tenant_id: string, status: string, started_at: string) =>
    env.DB.prepare(
      `INSERT INTO projection_rebuilds (id, tenant_id, projection, shadow_table, status, shards_total, shards_done, facts_replayed, started_at, finished_at)
       VALUES (?, ?, 'fragile', ?, ?, 16, ?, 0, ?, ?)`
    ).bind(id, tenant_id, `buyer_budgets__${id}`, status, status === "running" ? 4 : 16, started_at, status === "running" ? null : started_at).run()
  const list = async (query: string, token = tokenA) => {
    const response = await request(`/v1/batches${query}`, { token })
    return { status: response.status, body: await response.json<any>() }
  }

  it("lists the caller's tenant's batch jobs only, newest first, filtered by status and paged", async () => {
    // Started in the far future, so that these are the newest records of their tenants.
    const [a1, a2, a3, b1, p1] = ["a1", "a2", "a3", "b1", "p1"].map((n) => unique(`rb_${n}`))
    await insert(a1!, "tenant-a", "completed", "2999-01-01T00:00:01.000Z")
    await insert(a2!, "tenant-a", "running", "2999-01-01T00:00:02.000Z")
    await insert(a3!, "tenant-a", "failed", "2999-01-01T00:00:03.000Z")
    await insert(b1!, "tenant-b", "running", "2999-01-01T00:00:04.000Z")
    await insert(p1!, "factline", "running", "2999-01-01T00:00:05.000Z")

    const asA = await list("?limit=3")
    expect(asA.status).toBe(200)
    expect(asA.body.data.map((b: any) => b.batch_id)).toEqual([a3, a2, a1])
    expect(asA.body.data[1]).toMatchObject({ batch_id: a2, operation: "rebuild", projection: "fragile", status: "running", shards_total: 16, shards_done: 4, tenant_id: "tenant-a" })
    expect((await list("?limit=100")).body.data.every((b: any) => b.tenant_id === "tenant-a")).toBe(true)

    const running = await list("?status=running&limit=100")
    expect(running.body.data.map((b: any) => b.batch_id)).toContain(a2)
    expect(running.body.data.every((b: any) => b.status === "running" && b.tenant_id === "tenant-a")).toBe(true)

    // Paging: one at a time, by next_cursor, in the same order.
    const first = await list("?limit=1")
    expect(first.body.data.map((b: any) => b.batch_id)).toEqual([a3])
    const second = await list(`?limit=1&cursor=${first.body.next_cursor}`)
    expect(second.body.data.map((b: any) => b.batch_id)).toEqual([a2])

    expect((await list("?limit=100", tokenB)).body.data.map((b: any) => b.batch_id)).toContain(b1)
    expect(JSON.stringify((await list("?limit=100", tokenB)).body)).not.toMatch(new RegExp(`${a1}|${a2}|${a3}|${p1}`))
    const asPlatform = await list("?status=running&limit=100", tokenPlatform)
    expect(asPlatform.body.data[0]).toMatchObject({ batch_id: p1, tenant_id: "factline" })
    expect(asPlatform.body.data.every((b: any) => b.tenant_id === "factline")).toBe(true)

    await env.DB.prepare("DELETE FROM projection_rebuilds WHERE id IN (?, ?, ?, ?, ?)").bind(a1, a2, a3, b1, p1).run()
  })

  it("refuses bad parameters, and tokens without the admin or platform scope", async () => {
    expect((await list("?status=done")).body.error).toMatchObject({ code: "invalid_query", message: "status: must be one of queued, running, succeeded, failed, cancelled, completed" })
    expect((await list("?limit=0")).status).toBe(400)
    expect((await list("?limit=101")).status).toBe(400)
    expect((await list("?cursor=nope")).body.error.code).toBe("invalid_query")
    expect((await list("?limt=5")).status).toBe(400)
    expect((await list("?status=running&status=failed")).status).toBe(400)
    expect((await request("/v1/batches")).status).toBe(401)
    expect((await list("", tokenAReadOnly)).status).toBe(403)
    const empty = await list("?status=failed&cursor=" + btoa(JSON.stringify(["0000", "x"])).replace(/=+$/, ""))
    expect(empty.body).toEqual({ data: [], next_cursor: null })
  })
})
