/**
 * A projection new to the deployment catches up by itself (issue 23, item 2), in workerd with the real local
 * D1, ledger shards and queues: `tallies` (TestModule) has no `projection_versions` row here — it is new — and
 * 10,000 `tallied` facts are already in the ledger, appended straight to the shards (so no projection ever saw
 * them, as facts stored before the projection was deployed). The check (what every scheduled run does; here
 * `POST /v1/projections/catch-up`) starts a replay named by the system; live `tallied` facts keep arriving
 * over HTTP from before the check to after the swap (some applied live before the replay reads them again);
 * reads answer `catching_up` until the swap; afterwards the projection holds exactly the sums of the stored and
 * the live facts — none missing, none applied twice — and reads have their normal shape.
 */
import { env } from "cloudflare:workers"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { ledger, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { talliesMigration } from "./TestModule.js"

const tenant = "tenant-a"
const stored = 10_000
const streams = 200
const groups = 8

const seed = async (prefix: string) => {
  const expected = new Map<string, { total: number; facts: number }>()
  const at = new Date().toISOString()
  const all = Array.from({ length: streams }, (_, s) => ({
    tenant_id: tenant,
    stream: `${prefix}-stream-${s}`,
    facts: Array.from({ length: stored / streams }, (_, n) => {
      const group = `${prefix}-g${(s + n) % groups}`
      const amount = ((s * 31 + n * 7) % 97) + 1
      const sum = expected.get(group) ?? { total: 0, facts: 0 }
      expected.set(group, { total: sum.total + amount, facts: sum.facts + 1 })
      return { fact_id: `${prefix}_f_${s}_${n}`, type: "tallied", data: { group, amount }, causation_id: `${prefix}_m_${s}_${n}`, correlation_id: `${prefix}_c_${s}`, caused_by: "tally", created_at: at }
    })
  }))
  // 1,000 facts per call: one RPC per shard touched, the shards written in parallel.
  for (let i = 0; i < all.length; i += 20) {
    const results = await Effect.runPromise(ledger().append(all.slice(i, i + 20)))
    expect(results.every((r) => r.status === "appended")).toBe(true)
  }
  return expected
}

const read = async (group?: string) => {
  const response = await request(`/v1/projections/tallies?limit=500${group ? `&group_id=${group}` : ""}`, { token: tokenA })
  expect(response.status).toBe(200)
  return response.json<{ projection: string; data: Array<{ group_id: string; total: number; facts: number; notes: number }>; next_cursor: string | null; status?: string; catch_up?: { progress: number; since: string | null } }>()
}

describe("a projection new to the deployment", () => {
  it("replays 10,000 stored facts by itself while traffic continues: catching_up during, exact and normal after", async () => {
    // Deployed: the table is migrated on every read database; the example's own projections are current.
    for (const db of [env.DB, env.FACTLINE_READ_DB_1]) {
      await db.prepare(talliesMigration).run()
    }
    await env.DB.prepare(
      "INSERT INTO projection_versions (projection, version, status, updated_at) VALUES ('calls', 1, 'current', ?1), ('buyer_budgets', 1, 'current', ?1)"
    ).bind(new Date().toISOString()).run()
    const prefix = unique("t")
    const expected = await seed(prefix)

    // Before any check: the projection holds nothing of the stored facts (no projection saw them).
    const before = await read()
    expect(before.data.filter((r) => r.group_id.startsWith(prefix))).toEqual([])

    // Live traffic throughout: tallies of the same groups over HTTP, five every 20 ms, from before the check
    // until the projection reads current again.
    const live = new Map<string, { total: number; facts: number }>()
    let posting = true
    let posts = 0
    const traffic = (async () => {
      while (posting) {
        const round = posts++
        const events = Array.from({ length: 5 }, (_, i) => {
          const group = `${prefix}-g${(round + i) % groups}`
          const amount = round + i + 1
          const sum = live.get(group) ?? { total: 0, facts: 0 }
          live.set(group, { total: sum.total + amount, facts: sum.facts + 1 })
          const key = `${prefix}-live-${round}-${i}`
          return { schema_version: 1, message_type: "test.tally.recorded", message_id: key, idempotency_key: key, correlation_id: key, tenant_id: tenant, subject: `${prefix}-live-${i}`, source: "test", created_at: new Date().toISOString(), payload: { group, amount } }
        })
        expect((await postEvents({ events })).status).toBe(202)
        await new Promise((r) => setTimeout(r, 20))
      }
    })()
    // Some live facts are already applied (to the live table) before the check: the replay reads them again.
    for (let i = 0; ; i++) {
      const page = await read()
      if (page.data.filter((r) => r.group_id.startsWith(prefix)).reduce((n, r) => n + r.facts, 0) >= 15) break
      expect(i).toBeLessThan(1_000)
      await new Promise((r) => setTimeout(r, 20))
    }

    const check = await request("/v1/projections/catch-up", { method: "POST", token: tokenPlatform })
    expect(check.status).toBe(200)
    const checked = await check.json<any>()
    const started = checked.steps.find((s: any) => s.projection === "tallies")
    expect(started).toMatchObject({ action: "started" })
    expect(started.batch_id).toMatch(/^cu_/)
    // The projection without a table is reported, not rebuilt; the current ones are left alone.
    expect(checked.steps.find((s: any) => s.projection === "unmigrated")).toMatchObject({ action: "not_migrated" })
    expect(checked.steps.filter((s: any) => s.projection === "calls" || s.projection === "buyer_budgets").map((s: any) => s.action)).toEqual(["current", "current"])

    // Reads answer catching_up, with its progress, until the replay has swapped.
    let sawCatchingUp = 0
    for (let i = 0; i < 3_000; i++) {
      const page = await read()
      if (page.status !== "catching_up") break
      sawCatchingUp++
      expect(page.catch_up!.progress).toBeGreaterThanOrEqual(0)
      expect(page.catch_up!.progress).toBeLessThanOrEqual(1)
      await new Promise((r) => setTimeout(r, 20))
    }
    expect(sawCatchingUp).toBeGreaterThan(0)
    const postsBeforeCurrent = posts
    while (posts < postsBeforeCurrent + 3) await new Promise((r) => setTimeout(r, 10))
    posting = false
    await traffic
    await drain({ timeoutMs: 90_000 })

    // Exact: every stored and every live fact counted once.
    const after = await read()
    expect(after.status).toBeUndefined()
    expect(after.catch_up).toBeUndefined()
    expect(Object.keys(after).sort()).toEqual(["data", "next_cursor", "projection"])
    const want = [...new Set([...expected.keys(), ...live.keys()])].sort().map((group_id) => ({
      group_id,
      total: (expected.get(group_id)?.total ?? 0) + (live.get(group_id)?.total ?? 0),
      facts: (expected.get(group_id)?.facts ?? 0) + (live.get(group_id)?.facts ?? 0),
      notes: 0
    }))
    expect(after.data.filter((r) => r.group_id.startsWith(prefix))).toEqual(want)
    expect(want.reduce((n, r) => n + r.facts, 0)).toBe(stored + [...live.values()].reduce((n, r) => n + r.facts, 0))

    // Progress and outcome are visible to operators: the projections listing and the batches listing.
    const again = await (await request("/v1/projections/catch-up", { method: "POST", token: tokenPlatform })).json<any>()
    expect(again.steps.find((s: any) => s.projection === "tallies")).toMatchObject({ action: "completed", batch_id: started.batch_id })
    const listed = await (await request("/v1/projections", { token: tokenPlatform })).json<any>()
    const tallies = listed.data.find((p: any) => p.projection === "tallies")
    expect(tallies).toMatchObject({ version: 1, recorded_version: 1, status: "current", rebuild: { batch_id: started.batch_id, status: "completed" } })
    // The replay read the stored facts and live ones the live consumer had applied already: counted once (above).
    expect(tallies.rebuild.facts_replayed).toBeGreaterThanOrEqual(stored + 15)
    expect(tallies.rebuild.shards_done).toBe(tallies.rebuild.shards_total)
    expect(listed.data.find((p: any) => p.projection === "unmigrated")).toMatchObject({ status: "not_migrated", detail: expect.stringContaining("test_unmigrated") })
    const batches = await (await request("/v1/batches?limit=100", { token: tokenPlatform })).json<any>()
    expect(batches.data.find((b: any) => b.batch_id === started.batch_id)).toMatchObject({ operation: "rebuild", projection: "tallies", status: "completed" })
    // A third check changes nothing: it is current.
    const third = await (await request("/v1/projections/catch-up", { method: "POST", token: tokenPlatform })).json<any>()
    expect(third.steps.find((s: any) => s.projection === "tallies")).toMatchObject({ action: "current" })
  }, 120_000)

  it("a mapping version other than the one recorded catches the projection up again", async () => {
    // The deployment recorded tallies at version 0 (a mapping older than the running code's 1). An isolate that
    // has seen the projection current at its version trusts that (a version changes only with a deploy, in a
    // new isolate): the listing shows the change.
    await env.DB.prepare("UPDATE projection_versions SET version = 0 WHERE projection = 'tallies'").run()
    const pending = await (await request("/v1/projections", { token: tokenPlatform })).json<any>()
    expect(pending.data.find((p: any) => p.projection === "tallies")).toMatchObject({ status: "catching_up", version: 1, recorded_version: 0 })
    const check = await (await request("/v1/projections/catch-up", { method: "POST", token: tokenPlatform })).json<any>()
    const step = check.steps.find((s: any) => s.projection === "tallies")
    expect(step).toMatchObject({ action: "started" })
    await drain({ timeoutMs: 90_000 })
    const done = await (await request("/v1/projections", { token: tokenPlatform })).json<any>()
    expect(done.data.find((p: any) => p.projection === "tallies")).toMatchObject({ status: "current", recorded_version: 1, rebuild: { batch_id: step.batch_id, status: "completed" } })
  }, 120_000)
})
