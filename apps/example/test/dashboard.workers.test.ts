/**
 * The operators' dashboard page (GET /dashboard: self-contained, a nonce-only CSP, no data in it) and the
 * batch-job list it reads (GET /v1/batches: tenant-scoped, newest first, filtered and paged).
 * The page itself is driven in a real browser by scripts/browser.mjs.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { request, tokenA, tokenAReadOnly, tokenB, tokenPlatform, unique } from "./helpers.js"

describe("GET /dashboard", () => {
  it("is one self-contained HTML page whose only script and style carry this response's CSP nonce", async () => {
    const response = await request("/dashboard")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8")
    expect(response.headers.get("x-frame-options")).toBe("DENY")
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(response.headers.get("x-content-type-options")).toBe("nosniff")
    expect(response.headers.get("referrer-policy")).toBe("no-referrer")
    const csp = response.headers.get("content-security-policy")!
    const nonce = /script-src 'nonce-([\w-]+)'/.exec(csp)?.[1]
    expect(nonce).toMatch(/^[\w-]{20,}$/)
    expect(csp).toBe(
      `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`
    )
    const page = await response.text()
    expect([...page.matchAll(/<script\b[^>]*>/g)].map((m) => m[0])).toEqual([`<script nonce="${nonce}">`])
    expect([...page.matchAll(/<style\b[^>]*>/g)].map((m) => m[0])).toEqual([`<style nonce="${nonce}">`])
    // Nothing from elsewhere, no inline handlers or style attributes (the CSP would block them anyway).
    expect(page).not.toMatch(/\b(src|href)=["']?(https?:|\/\/)/)
    expect(page).not.toMatch(/\son[a-z]+=["']/)
    expect(page).not.toMatch(/\sstyle=["']/)
    // Data reaches the DOM as text only.
    expect(page).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/)
    expect(page).toContain("sessionStorage")
    expect(page).not.toContain("localStorage")

    const again = await request("/dashboard")
    expect(again.headers.get("content-security-policy")).not.toContain(nonce!)
  })

  it("is public and holds no data: the same page with or without a token, which it never echoes", async () => {
    const anonymous = await request("/dashboard")
    const signedIn = await request("/dashboard", { token: tokenPlatform })
    const strip = (html: string) => html.replace(/nonce(-|=")[\w-]+/g, "nonce")
    expect(strip(await signedIn.text())).toBe(strip(await anonymous.text()))
    expect(await (await request("/dashboard", { token: tokenPlatform })).text()).not.toContain(tokenPlatform)
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
