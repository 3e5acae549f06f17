/**
 * The facts archive, in Node over the test kit (in-memory D1, ledger shards and R2 on node:sqlite): facts of
 * days past the window leave the D1 copy for Parquet parts in the bucket, and DuckDB reading those parts back
 * sees exactly the ledger's facts of the archived days — no fact missing, none twice.
 */
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { DuckDBInstance } from "@duckdb/node-api"
import { Effect } from "effect"
import type { Fact } from "@factline/schemas"
import { describe, expect, it } from "vitest"
import * as Projection from "../definitions/Projection.js"
import { Ledger } from "../ledger/Ledger.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import * as Sql from "../platform/Sql.js"
import * as TestPlatform from "../testing/TestPlatform.js"
import * as Archive from "./Archive.js"
import * as Maintenance from "../operations/Maintenance.js"

const dayMs = 24 * 3600 * 1000
const tenant = "acme"
/** Facts at noon of `daysAgo` days before today, with their minute as an offset. */
const at = (daysAgo: number, minute: number) => {
  const day = new Date(Date.now() - daysAgo * dayMs).toISOString().slice(0, 10)
  return new Date(Date.parse(`${day}T12:00:00.000Z`) + minute * 60_000).toISOString()
}

const draft = (stream: string, n: number, createdAt: string) => ({
  fact_id: `f_${stream}_${n}`,
  type: n % 3 === 0 ? "charge.refunded" : "charge.captured",
  data: { cents: n * 100, note: `über ${n}`, nested: { big: "9007199254740993" } },
  causation_id: `m_${stream}_${n}`,
  correlation_id: `c_${stream}`,
  caused_by: "charges",
  created_at: createdAt,
  ...(n % 2 === 0 ? { traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-01` } : {})
})

/** Appends the facts to the ledger and copies them to D1, as the relay and the projections consumer do. */
const seed = (platform: TestPlatform.TestPlatform, days: ReadonlyArray<number>) =>
  platform.run(Effect.gen(function*() {
    const ledger = yield* Ledger
    const sql = yield* Sql.PlatformDatabase
    const groups = ["acct-1", "acct-2", "acct-3", "acct-4"].map((stream, s) => ({
      tenant_id: tenant,
      stream,
      facts: days.flatMap((d, i) => [0, 1, 2].map((k) => draft(stream, i * 3 + k + 1, at(d, s * 10 + k))))
    }))
    const appended = yield* ledger.append(groups)
    const facts = appended.flatMap((r) => (r.status === "appended" ? r.facts : []))
    yield* sql.batch(Projection.factsStatements(facts))
    return facts
  }))

const ledgerFacts = (platform: TestPlatform.TestPlatform) =>
  platform.run(Effect.gen(function*() {
    const ledger = yield* Ledger
    const shards = yield* LedgerTopology.shardsAfter("", 1_000, tenant)
    return (yield* Effect.forEach(shards, (s) => ledger.readShard(s))).flat()
  }))

const copyCount = (platform: TestPlatform.TestPlatform) =>
  platform.run(Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) => sql.first(Sql.Count, Sql.statement("SELECT COUNT(*) AS n FROM facts"))))

/** The bucket's archive objects written to a directory, as `wrangler r2 object get` would fetch them. */
const download = (platform: TestPlatform.TestPlatform) => {
  const dir = mkdtempSync(join(tmpdir(), "factline-archive-"))
  for (const [key, bytes] of platform.bucket.objects) {
    if (!key.includes("/archive/facts/")) continue
    mkdirSync(dirname(join(dir, key)), { recursive: true })
    writeFileSync(join(dir, key), bytes)
  }
  return dir
}

const duckdb = async (sql: string) => {
  const instance = await DuckDBInstance.create(":memory:")
  const connection = await instance.connect()
  try {
    return (await connection.runAndReadAll(sql)).getRowObjectsJS()
  } finally {
    connection.closeSync()
    instance.closeSync()
  }
}

/** A ledger fact as an archive row (the columns of the `facts` copy; `data`, JSON text in the file, parsed). */
const asRow = (f: Fact) => ({
  tenant_id: f.tenant_id,
  fact_id: f.fact_id,
  stream: f.stream,
  sequence: BigInt(f.sequence),
  type: f.type,
  causation_id: f.causation_id,
  correlation_id: f.correlation_id,
  caused_by: f.caused_by,
  created_at: f.created_at,
  traceparent: f.traceparent ?? null,
  schema_version: f.schema_version ?? 1,
  data: f.data
})

describe("the facts archive", () => {
  it("DuckDB reads back from the Parquet archive exactly the ledger's facts of the archived days", async () => {
    const platform = TestPlatform.make([], { shardsPerTenant: 4, settings: { FACTLINE_FACTS_WINDOW_DAYS: "30" } })
    await seed(platform, [45, 40, 31, 29, 1])
    expect(await copyCount(platform)).toEqual({ n: 4 * 5 * 3 })

    // Small runs: several parts per day, several runs to work the backlog off.
    while ((await platform.run(Maintenance.archiveFacts(5))) > 0);
    const cutoff = await platform.run(Archive.cutoff(30))
    const ledger = await ledgerFacts(platform)
    const archived = ledger.filter((f) => f.created_at < cutoff)
    expect(archived.length).toBe(4 * 3 * 3)
    expect(await copyCount(platform)).toEqual({ n: ledger.length - archived.length })
    const keys = [...platform.bucket.objects.keys()].filter((k) => k.includes("/archive/facts/"))
    expect(new Set(keys.map((k) => k.split("/")[3]))).toEqual(new Set([at(45, 0), at(40, 0), at(31, 0)].map((t) => t.slice(0, 10))))
    expect(keys.every((k) => /^acme\/archive\/facts\/\d{4}-\d{2}-\d{2}\/part-\d{4}\.parquet$/.test(k))).toBe(true)
    expect(keys.length).toBeGreaterThan(3)

    // A fact copied to D1 again after its day was archived (a replayed dead letter) is deleted, not archived twice.
    await platform.run(Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) => sql.batch(Projection.factsStatements(archived.slice(0, 2)))))
    expect(await platform.run(Maintenance.archiveFacts())).toBe(2)

    const dir = download(platform)
    const rows = await duckdb(
      `SELECT * FROM read_parquet('${dir}/acme/archive/facts/*/*.parquet') ORDER BY created_at, fact_id`
    )
    const expected = archived.map(asRow).sort((a, b) => a.created_at.localeCompare(b.created_at) || a.fact_id.localeCompare(b.fact_id))
    expect(rows.map((row) => ({ ...row, data: JSON.parse(String(row.data)) }))).toEqual(expected)
    expect(await duckdb(`SELECT type, count(*) AS n FROM read_parquet('${dir}/*/archive/facts/*/*.parquet') GROUP BY type ORDER BY type`))
      .toEqual([{ type: "charge.captured", n: 24n }, { type: "charge.refunded", n: 12n }])
    // Within a part, rows are sorted by (stream, sequence).
    const part = await duckdb(`SELECT stream, sequence FROM read_parquet('${dir}/${keys[0]}')`)
    expect(part).toEqual([...part].sort((a, b) => String(a.stream).localeCompare(String(b.stream)) || Number(a.sequence) - Number(b.sequence)))
  })

  it("the same rows encode to the same bytes (a rewritten part is identical)", async () => {
    const platform = TestPlatform.make([], { settings: { FACTLINE_FACTS_WINDOW_DAYS: "30" } })
    await seed(platform, [40])
    const rows = await platform.run(Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) => sql.all(Archive.CopiedFact, Sql.statement("SELECT * FROM facts"))))
    const { encode } = await import("./Parquet.js")
    expect(encode(rows)).toEqual(encode([...rows].reverse()))
  })
})
