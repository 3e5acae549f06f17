/**
 * One projection's failure is its own (issue 23, item 5), in workerd with the real local D1 and queues:
 * `unmigrated` (TestModule) maps `noted` facts to a table no migration created. A `noted` fact — arriving in
 * the same batches as calls — is still applied to the `facts` copy, to `tallies` (which maps it too) and the
 * calls to `calls`; only `unmigrated` fails, at once (not after ten retries), dead-lettered naming the
 * projection and its table; reads of it answer 503 `projection_not_migrated`, not "store unavailable". Once
 * the migration is applied, replaying the dead letters fills it and changes nothing elsewhere.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { talliesMigration } from "./TestModule.js"

const notesOf = async (table: string, prefix: string) =>
  (await env.DB.prepare(`SELECT group_id, notes FROM ${table} WHERE tenant_id = 'tenant-a' AND group_id LIKE ? ORDER BY group_id`).bind(`${prefix}%`).all()).results

describe("a projection whose table is missing", () => {
  it("fails only itself: the facts copy and the other projections apply the fact; its dead letter names it; its reads answer projection_not_migrated", async () => {
    for (const db of [env.DB, env.FACTLINE_READ_DB_1]) await db.prepare(talliesMigration).run()
    const run = unique("iso")
    const notes = Array.from({ length: 6 }, (_, i) => {
      const key = `${run}-note-${i}`
      return { schema_version: 1, message_type: "test.note.recorded", message_id: key, idempotency_key: key, correlation_id: key, tenant_id: "tenant-a", subject: key, source: "test", created_at: new Date().toISOString(), payload: { group: `${run}-g${i % 2}` } }
    })
    const calls = Array.from({ length: 4 }, (_, i) => callCompleted({}, { call_id: `${run}_call_${i}`, buyer_id: `${run}_buyer`, duration_s: 90, price_cents: 100 }))
    expect((await postEvents({ events: [...notes.slice(0, 3), ...calls, ...notes.slice(3)] })).status).toBe(202)
    await drain({ timeoutMs: 60_000 })

    // The other projections and the facts copy have every fact.
    expect(await notesOf("test_tallies", run)).toEqual([{ group_id: `${run}-g0`, notes: 3 }, { group_id: `${run}-g1`, notes: 3 }])
    const copied = await env.DB.prepare("SELECT COUNT(*) AS n FROM facts WHERE tenant_id = 'tenant-a' AND type = 'noted' AND stream LIKE ?").bind(`${run}%`).first<{ n: number }>()
    expect(copied!.n).toBe(6)
    const callRows = await env.DB.prepare("SELECT call_id, charged_cents FROM calls WHERE tenant_id = 'tenant-a' AND buyer_id = ?").bind(`${run}_buyer`).all()
    expect(callRows.results).toHaveLength(4)
    expect(callRows.results.every((r: any) => r.charged_cents === 100)).toBe(true)

    // Only `unmigrated` failed: one dead letter per noted fact, at its first attempt, naming it and its table.
    const dlq = await (await request("/v1/dlq?queue=factline-projections&limit=100", { token: tokenA })).json<any>()
    const mine = dlq.data.filter((d: any) => d.last_error.includes(run) || d.subject?.startsWith(run))
    expect(mine).toHaveLength(6)
    for (const d of mine) {
      expect(d).toMatchObject({ reason: "permanent_failure", attempts: 1, status: "open" })
      expect(d.last_error).toMatch(/^projection_not_migrated: projection "unmigrated" is not migrated: its table test_unmigrated does not exist/)
    }
    expect(dlq.data.filter((d: any) => d.last_error.includes(`${run}_call`))).toEqual([])

    // Reads of it: a specific 503, naming the table; the others read as usual.
    const refused = await request(`/v1/projections/unmigrated?group_id=${run}-g0`, { token: tokenA })
    expect(refused.status).toBe(503)
    const problem = await refused.json<any>()
    expect(problem.error.code).toBe("projection_not_migrated")
    expect(problem.error.message).toMatch(/test_unmigrated does not exist.*npm run db:generate/)
    expect((await request(`/v1/projections/tallies?group_id=${run}-g0`, { token: tokenA })).status).toBe(200)

    // The startup check reports it (the scheduled run's, here on demand).
    const listed = await (await request("/v1/projections/catch-up", { method: "POST", token: tokenPlatform })).json<any>()
    expect(listed.data.find((p: any) => p.projection === "unmigrated")).toMatchObject({ status: "not_migrated", detail: expect.stringContaining("table test_unmigrated") })

    // Migrated, then the dead letters replayed: it has the notes, and nothing else counted twice.
    for (const db of [env.DB, env.FACTLINE_READ_DB_1]) {
      await db.prepare("CREATE TABLE test_unmigrated (tenant_id TEXT NOT NULL, group_id TEXT NOT NULL, notes INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (tenant_id, group_id))").run()
    }
    for (const d of mine) expect((await request(`/v1/dlq/${d.id}/replay`, { method: "POST", token: tokenA })).status).toBe(202)
    await drain({ timeoutMs: 60_000 })
    expect(await notesOf("test_unmigrated", run)).toEqual([{ group_id: `${run}-g0`, notes: 3 }, { group_id: `${run}-g1`, notes: 3 }])
    expect(await notesOf("test_tallies", run)).toEqual([{ group_id: `${run}-g0`, notes: 3 }, { group_id: `${run}-g1`, notes: 3 }])
    expect((await request(`/v1/projections/unmigrated?group_id=${run}-g0`, { token: tokenA })).status).toBe(200)
  }, 120_000)
})
