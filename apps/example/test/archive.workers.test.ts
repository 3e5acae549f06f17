/**
 * The facts archive under faults, in workerd with the real local D1, ledger shards and R2: facts of days past
 * the window leave the D1 copy only once they are in a verified Parquet part, so a refusing bucket or a
 * refusing database loses nothing and doubles nothing — the archive and the live copy together hold exactly
 * the ledger's facts.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Effect } from "effect"
import { parquetReadObjects } from "hyparquet/src/index.js"
import { Failure, Projection } from "@factline/core"
import { Archive, Ledger, LedgerTopology, Sql } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { unique } from "./helpers.js"
import * as Faults from "./faults.js"
import { platform } from "./worker.js"

const dayMs = 24 * 3600 * 1000
const noonDaysAgo = (days: number, minute: number) =>
  new Date(Date.parse(`${new Date(Date.now() - days * dayMs).toISOString().slice(0, 10)}T12:00:00.000Z`) + minute * 60_000).toISOString()

const run = <A, E>(program: Effect.Effect<A, E, any>, bindings: Record<string, unknown> = env) =>
  platform.runtime(bindings as unknown as PlatformEnv).runPromise(program as Effect.Effect<A, E, never>)

/** The archive pass over read database 0 — the platform database (DB) here, where the tests' tenants are placed. */
const archiveRun = () => Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) => Effect.provideService(Archive.run(), Sql.ReadDatabase, sql))

/** Facts 40 days old (to archive) and 1 day old (to keep) in the ledger, copied to D1 as the projections consumer copies them. */
const seed = (tenant: string) =>
  run(Effect.gen(function*() {
    const ledger = yield* Ledger.Ledger
    const sql = yield* Sql.PlatformDatabase
    const groups = ["acct-1", "acct-2", "acct-3"].map((stream, s) => ({
      tenant_id: tenant,
      stream,
      facts: [40, 40, 40, 1].map((days, n) => ({
        fact_id: `f_${tenant}_${stream}_${n}`,
        type: n === 3 ? "charge.refunded" : "charge.captured",
        data: { cents: (n + 1) * 100, stream },
        causation_id: `m_${stream}_${n}`,
        correlation_id: `c_${stream}`,
        caused_by: "charges",
        created_at: noonDaysAgo(days, s * 10 + n)
      }))
    }))
    const appended = yield* ledger.append(groups)
    const facts = appended.flatMap((r) => (r.status === "appended" ? r.facts : []))
    yield* sql.batch(Projection.factsStatements(facts))
    return facts
  }))

const copyOf = async (tenant: string) =>
  (await env.DB.prepare("SELECT fact_id, stream, sequence, type, body, created_at FROM facts WHERE tenant_id = ? ORDER BY fact_id").bind(tenant).all<any>()).results

const archiveKeys = async (tenant: string) =>
  (await env.PAYLOADS.list({ prefix: `${tenant}/archive/facts/` })).objects.map((o) => o.key).sort()

const archivedRows = async (tenant: string) => {
  const rows: Array<Record<string, unknown>> = []
  for (const key of await archiveKeys(tenant)) {
    const file = await (await env.PAYLOADS.get(key))!.arrayBuffer()
    rows.push(...await parquetReadObjects({ file }))
  }
  return rows
}

const ledgerOf = (tenant: string) =>
  run(Effect.gen(function*() {
    const ledger = yield* Ledger.Ledger
    const shards = yield* LedgerTopology.shardsAfter("", 1_000, tenant)
    return (yield* Effect.forEach(shards, (s) => ledger.readShard(s))).flat()
  }))

/** Archive and live copy together, as (fact_id, stream, sequence, type, data, created_at), sorted: what the ledger must equal. */
const everywhere = async (tenant: string) => {
  const archived = (await archivedRows(tenant)).map((r) => [r.fact_id, r.stream, Number(r.sequence), r.type, JSON.parse(String(r.data)), r.created_at])
  const live = (await copyOf(tenant)).map((r) => [r.fact_id, r.stream, r.sequence, r.type, JSON.parse(r.body), r.created_at])
  return [...archived, ...live].sort((a, b) => String(a[0]).localeCompare(String(b[0])))
}
const ledgerRows = async (tenant: string) =>
  (await ledgerOf(tenant)).map((f) => [f.fact_id, f.stream, f.sequence, f.type, f.data, f.created_at]).sort((a, b) => String(a[0]).localeCompare(String(b[0])))

/** Runs the archive until it has nothing left to move (other tests' tenants included). */
const archiveAll = async (bindings: Record<string, unknown> = env) => {
  while ((await run(archiveRun(), bindings)) > 0);
}

describe("the facts archive under faults", () => {
  it("R2 refusing the put: every row stays in D1; the rerun archives each fact once", async () => {
    const tenant = unique("arch_r2")
    await seed(tenant)
    const before = await copyOf(tenant)
    expect(before).toHaveLength(12)

    const refusing = { ...env, PAYLOADS: Faults.refusingPuts(env.PAYLOADS, (key) => key.includes("/archive/facts/")) }
    const error = await run(Effect.flip(archiveRun()), refusing)
    expect(error).toBeInstanceOf(Failure.Unavailable)
    expect(await copyOf(tenant)).toEqual(before)
    expect(await archiveKeys(tenant)).toEqual([])

    await archiveAll()
    const keys = await archiveKeys(tenant)
    expect(keys).toEqual([Archive.partKey(tenant, noonDaysAgo(40, 0).slice(0, 10), 0)])
    expect(await copyOf(tenant)).toHaveLength(3)
    expect((await archivedRows(tenant)).map((r) => r.fact_id).sort()).toEqual(before.filter((r: any) => r.created_at < noonDaysAgo(2, 0)).map((r: any) => r.fact_id).sort())
    expect(await everywhere(tenant)).toEqual(await ledgerRows(tenant))
    // Sorted by (stream, sequence) within the part.
    expect((await archivedRows(tenant)).map((r) => `${r.stream}/${r.sequence}`)).toEqual(["acct-1/1", "acct-1/2", "acct-1/3", "acct-2/1", "acct-2/2", "acct-2/3", "acct-3/1", "acct-3/2", "acct-3/3"])
  })

  it("D1 refusing the delete after the upload: the rerun deletes the rows without writing them twice", async () => {
    const tenant = unique("arch_d1")
    await seed(tenant)
    const refusing = { ...env, DB: Faults.refusingStatements(env.DB, (sql) => /^DELETE FROM facts/.test(sql.trim())) }
    const error = await run(Effect.flip(archiveRun()), refusing)
    expect(error).toBeInstanceOf(Failure.Unavailable)
    // Uploaded and verified, but still in D1.
    const [key] = await archiveKeys(tenant)
    expect(key).toBeDefined()
    const uploaded = new Uint8Array(await (await env.PAYLOADS.get(key!))!.arrayBuffer())
    expect(await copyOf(tenant)).toHaveLength(12)

    await archiveAll()
    expect(await archiveKeys(tenant)).toEqual([key])
    expect(new Uint8Array(await (await env.PAYLOADS.get(key!))!.arrayBuffer())).toEqual(uploaded)
    expect(await copyOf(tenant)).toHaveLength(3)
    expect(await archivedRows(tenant)).toHaveLength(9)
    expect(await everywhere(tenant)).toEqual(await ledgerRows(tenant))

    // A fact copied to D1 again after its day was archived is deleted, not archived twice.
    const again = (await ledgerOf(tenant)).filter((f) => f.created_at < noonDaysAgo(2, 0)).slice(0, 2)
    await run(Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) => sql.batch(Projection.factsStatements(again))))
    await archiveAll()
    expect(await archiveKeys(tenant)).toEqual([key])
    expect(await everywhere(tenant)).toEqual(await ledgerRows(tenant))
  })

  it("the scheduled maintenance runs the archive and survives a refusing bucket (logged, retried next run)", async () => {
    const tenant = unique("arch_cron")
    await seed(tenant)
    const refusing = { ...env, PAYLOADS: Faults.refusingPuts(env.PAYLOADS, (key) => key.includes("/archive/facts/")) }
    await platform.scheduled({ scheduledTime: Date.now(), cron: "*/5 * * * *", noRetry() {} } as ScheduledController, refusing as unknown as PlatformEnv, {} as ExecutionContext)
    expect(await copyOf(tenant)).toHaveLength(12)
    await platform.scheduled({ scheduledTime: Date.now(), cron: "*/5 * * * *", noRetry() {} } as ScheduledController, env as unknown as PlatformEnv, {} as ExecutionContext)
    expect(await copyOf(tenant)).toHaveLength(3)
    expect(await everywhere(tenant)).toEqual(await ledgerRows(tenant))
  })
})
