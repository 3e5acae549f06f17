/** Query filters by column type: a boolean column (stored 0/1) is filtered with true/false; anything else is a 400 naming it. */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { request, tokenA, tokenB, unique } from "./helpers.js"

const get = async (path: string, token = tokenA) => {
  const response = await request(path, { token })
  return { status: response.status, body: await response.json<any>() }
}

describe("projection query filters", () => {
  it("filters a boolean column with true/false (or 1/0), and refuses other values naming the column", async () => {
    const buyer = unique("buyer")
    await env.DB.batch([
      env.DB.prepare("INSERT INTO calls (tenant_id, call_id, buyer_id, qualified) VALUES ('tenant-a', ?, ?, 1)").bind(unique("call"), buyer),
      env.DB.prepare("INSERT INTO calls (tenant_id, call_id, buyer_id, qualified) VALUES ('tenant-a', ?, ?, 0)").bind(unique("call"), buyer)
    ])
    const yes = await get(`/v1/projections/calls?buyer_id=${buyer}&qualified=true`)
    expect(yes.status).toBe(200)
    expect(yes.body.data.map((r: any) => r.qualified)).toEqual([true])
    const no = await get(`/v1/projections/calls?buyer_id=${buyer}&qualified=0`)
    expect(no.body.data.map((r: any) => r.qualified)).toEqual([false])
    const bad = await get(`/v1/projections/calls?buyer_id=${buyer}&qualified=yes`)
    expect(bad).toEqual({
      status: 400,
      body: { error: { code: "invalid_query", message: "qualified: must be true or false", details: { problems: [{ path: "qualified", message: "must be true or false" }], problems_total: 1 } } }
    })
    expect((await get(`/v1/projections/calls?buyer_id=${buyer}&qualified=true`, tokenB)).body.data).toEqual([])
  })
})
