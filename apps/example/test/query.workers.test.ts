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

  it("the filters are the projection's columns: an unknown one, or several, are a 400 naming each; a repeated one is refused", async () => {
    const unknown = await get("/v1/projections/calls?colour=red&buyer_id=b&size=9")
    expect(unknown.status).toBe(400)
    expect(unknown.body.error.code).toBe("invalid_query")
    expect(unknown.body.error.details.problems.map((p: any) => p.path).sort()).toEqual(["colour", "size"])
    const repeated = await get("/v1/projections/calls?buyer_id=a&buyer_id=b")
    expect(repeated.status).toBe(400)
    expect(repeated.body.error.details.problems.map((p: any) => p.path)).toEqual(["buyer_id"])
    // cursor and limit are the endpoint's own parameters, checked by its schema.
    const limit = await get("/v1/projections/calls?limit=0")
    expect(limit.status).toBe(400)
    expect(limit.body.error.details.problems.map((p: any) => p.path)).toEqual(["limit"])
  })
})
