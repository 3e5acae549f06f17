/**
 * What D1 bills as rows written, measured on local D1 (Miniflare's D1: SQLite in workerd, whose `meta.rows_written`
 * is the storage engine's count — the same counter production D1 bills; the figures here are local ones).
 *
 * - probes: rows written by DROP TABLE, DELETE, INSERT with 0/1/2 secondary indexes, an INSERT OR IGNORE that
 *   ignores, an upsert that updates — the facts the cost model (scripts/capacity.mjs, docs/capacity.md) rests on;
 * - the breakdown of the projection stage's rows per event by statement (the bench's `d1_rows_written`), on the
 *   bench's event shape: an outcome per call, then its qualification and, for two calls in three, its charge.
 */
import { env } from "cloudflare:workers"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { describe, expect, it } from "vitest"
import { Registry } from "@factline/core"
import { FactsCopy, KeyRing, Placement, ProjectionConsumer, ProjectionStore } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import { storedFact, unique } from "./helpers.js"
import { platform } from "./worker.js"

const db = env.DB

/** Rows written by one statement (`json` bound as its only parameter when given). */
const written = async (sql: string, json?: string) => {
  const statement = db.prepare(sql)
  const result = await (json === undefined ? statement : statement.bind(json)).run()
  return result.meta.rows_written
}

const thousand = JSON.stringify(Array.from({ length: 1000 }, (_, i) => `key_${i}`))

/** A fresh table of three text columns keyed by `k`: WITHOUT ROWID (the platform's hot tables) or a rowid table, with `indexes` secondary indexes. */
const table = async (options: { readonly withoutRowid: boolean; readonly indexes: number }) => {
  const name = unique("probe").replace(/[^a-z0-9_]/gi, "_")
  await written(`CREATE TABLE ${name} (t TEXT NOT NULL, k TEXT NOT NULL, a TEXT, b TEXT, PRIMARY KEY (t, k))${options.withoutRowid ? " WITHOUT ROWID" : ""}`)
  for (let i = 0; i < options.indexes; i++) await written(`CREATE INDEX ${name}_i${i} ON ${name} (${i === 0 ? "a" : "b"})`)
  return name
}
const fill = (name: string) => written(`INSERT INTO ${name} (t, k, a, b) SELECT 'x', value, value, value FROM json_each(?)`, thousand)

/** Records each statement's SQL and the rows D1 reports it wrote (`batch` and single runs). */
const recording = (real: D1Database) => {
  const log: Array<{ readonly sql: string; readonly rowsWritten: number }> = []
  const sqlOf = new WeakMap<object, string>()
  const wrap = (statement: D1PreparedStatement, sql: string): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...args: Array<unknown>) => wrap(target.bind(...args), sql)
        if (prop === "run" || prop === "all") {
          return async () => {
            const result = await target[prop]()
            log.push({ sql, rowsWritten: result.meta.rows_written })
            return result
          }
        }
        const value = (target as any)[prop]
        return typeof value === "function" ? value.bind(target) : value
      }
    })
    sqlOf.set(proxy, sql)
    originals.set(proxy, statement)
    return proxy
  }
  const originals = new WeakMap<object, D1PreparedStatement>()
  const proxied = new Proxy(real, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql), sql)
      if (prop === "batch") {
        return async (statements: Array<D1PreparedStatement>) => {
          const results = await target.batch(statements.map((s) => originals.get(s) ?? s))
          results.forEach((r, i) => log.push({ sql: sqlOf.get(statements[i]!) ?? "?", rowsWritten: r.meta.rows_written }))
          return results
        }
      }
      const value = (target as any)[prop]
      return typeof value === "function" ? value.bind(target) : value
    }
  })
  return { db: proxied, log }
}

/** One projections batch, as the consumer processes it (the framework's default facts copy: none, as the bench runs). */
const apply = async (facts: ReadonlyArray<Fact>, database: D1Database) => {
  const items = facts.map((f, i) => ({ key: `${i}`, value: { fact: f } }))
  const copy = FactsCopy.parse("none")
  if (typeof copy === "string") throw new Error(copy)
  const outcomes = await Effect.runPromise(ProjectionConsumer.process(items).pipe(
    Effect.provide(Layer.mergeAll(
      ProjectionStore.ProjectionStore.layer,
      Placement.TenantPlacement.single(database),
      Layer.succeed(Registry.Registry, platform.registry),
      FactsCopy.FactsCopySetting.layer(copy),
      KeyRing.KeyRing.over(env.LEDGER, { secretsKey: env.FACTLINE_SECRETS_KEY as string | undefined })
    ))
  ))
  return [...outcomes.values()]
}

/** The table a write statement writes (its first `INSERT INTO`, `UPDATE` or `DELETE FROM`). */
const target = (sql: string) => /(?:INSERT INTO|UPDATE|DELETE FROM)\s+"?([a-z_]+)"?/i.exec(sql)?.[1] ?? "read"

describe("D1 rows written", () => {
  it("probes: an index entry is a row; a delete is a row per row deleted; DROP TABLE and an ignored insert write none, a rename only schema rows", async () => {
    const plain = await table({ withoutRowid: true, indexes: 0 })
    const one = await table({ withoutRowid: true, indexes: 1 })
    const two = await table({ withoutRowid: true, indexes: 2 })
    const rowid = await table({ withoutRowid: false, indexes: 0 })
    const figures = {
      insert_without_rowid_0_indexes: await fill(plain),
      insert_without_rowid_1_index: await fill(one),
      insert_without_rowid_2_indexes: await fill(two),
      insert_rowid_table_composite_key: await fill(rowid),
      insert_or_ignore_all_conflicting: await written(`INSERT OR IGNORE INTO ${plain} (t, k, a, b) SELECT 'x', value, value, value FROM json_each(?)`, thousand),
      upsert_updating_unindexed_column: await written(`INSERT INTO ${one} (t, k, a, b) SELECT 'x', value, value, 'new' FROM json_each(?) WHERE true ON CONFLICT (t, k) DO UPDATE SET b = excluded.b`, thousand),
      upsert_updating_indexed_column: await written(`INSERT INTO ${one} (t, k, a, b) SELECT 'x', value, 'new', 'new' FROM json_each(?) WHERE true ON CONFLICT (t, k) DO UPDATE SET a = excluded.a`, thousand),
      delete_where_1_index: await written(`DELETE FROM ${one} WHERE t = 'x'`),
      delete_all_no_where: await written(`DELETE FROM ${plain}`),
      drop_table_1000_rows_2_indexes: await written(`DROP TABLE ${two}`),
      rename_table_1000_rows: await written(`ALTER TABLE ${rowid} RENAME TO ${rowid}_renamed`),
      rename_empty_table: await (async () => {
        const empty = await table({ withoutRowid: true, indexes: 0 })
        const rows = await written(`ALTER TABLE ${empty} RENAME TO ${empty}_renamed`)
        await written(`DROP TABLE ${empty}_renamed`)
        return rows
      })()
    }
    await written(`DROP TABLE ${rowid}_renamed`)
    await written(`DROP TABLE ${plain}`)
    await written(`DROP TABLE ${one}`)
    console.log(`local D1 rows written for 1,000 rows: ${JSON.stringify(figures)}`)
    expect(figures).toEqual({
      insert_without_rowid_0_indexes: 1000,
      insert_without_rowid_1_index: 2000,
      insert_without_rowid_2_indexes: 3000,
      insert_rowid_table_composite_key: 2000,
      insert_or_ignore_all_conflicting: 0,
      upsert_updating_unindexed_column: 1000,
      upsert_updating_indexed_column: 2000,
      // A delete counts the rows, not their index entries; without a WHERE too (no free truncation).
      delete_where_1_index: 1000,
      delete_all_no_where: 1000,
      drop_table_1000_rows_2_indexes: 0,
      // A rename rewrites schema rows (a few dozen, whatever the table holds), not the table's rows.
      rename_table_1000_rows: figures.rename_empty_table,
      rename_empty_table: figures.rename_empty_table
    })
    expect(figures.rename_empty_table).toBeLessThan(100)
  })

  /** As bench/worker.ts makes them: 100 calls over 50 buyers, qualified (and charged) when they last a minute or more. */
  const benchShape = async () => {
    const n = 100
    const buyers = Array.from({ length: 50 }, () => unique("buyer"))
    const calls = Array.from({ length: n }, (_, i) => ({ call_id: unique("call"), buyer_id: buyers[i % buyers.length]!, charged: (i * 37) % 180 >= 60 }))
    const outcomes = await Promise.all(calls.map(({ call_id, buyer_id }) => storedFact(call_id, 1, "outcome", { call_id, buyer_id, duration_s: 90, price_cents: 300, currency: "USD" })))
    const derived = (await Promise.all(calls.map(async ({ call_id, buyer_id, charged }) => [
      await storedFact(call_id, 2, "qualification", { call_id, qualified: charged }),
      ...(charged ? [await storedFact(call_id, 3, "charge", { call_id, buyer_id, amount_cents: 300, currency: "USD" })] : [])
    ]))).flat()
    const charged = calls.filter((c) => c.charged)
    return { n, buyers, outcomes, derived, charges: charged.length, chargedBuyers: new Set(charged.map((c) => c.buyer_id)).size }
  }

  /** Applies `batches` through a recording D1; rows written by table, and the buyers' stored charges. */
  const measure = async (label: string, shape: Awaited<ReturnType<typeof benchShape>>, batches: ReadonlyArray<ReadonlyArray<Fact>>) => {
    const { db: recorded, log } = recording(db)
    for (const batch of batches) expect(new Set((await apply(batch, recorded)).map(String)).size).toBe(1)
    const byTable: Record<string, number> = {}
    for (const { sql, rowsWritten } of log) byTable[target(sql)] = (byTable[target(sql)] ?? 0) + rowsWritten
    const perEvent = Object.fromEntries(Object.entries(byTable).map(([t, rows]) => [t, Math.round((rows / shape.n) * 100) / 100]))
    const total = Object.values(byTable).reduce((a, b) => a + b, 0) / shape.n
    console.log(`projection stage rows written per event, ${label}: ${JSON.stringify(perEvent)}, total ${total.toFixed(2)}`)
    const stored = await db.prepare(`SELECT SUM(charges) AS charges FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id IN (${shape.buyers.map(() => "?").join(", ")})`)
      .bind(...shape.buyers).first<{ charges: number }>()
    return { byTable, charges: stored?.charges }
  }

  it("the projection stage's rows per event, by table: a call's facts in two batches (as two relays send them, and the bench counts them since stop 40)", async () => {
    const shape = await benchShape()
    // The events stage's outcomes in one batch, fact-processing's derived facts in a later one.
    const { byTable, charges } = await measure("outcomes and derived facts in two batches", shape, [shape.outcomes, shape.derived])
    expect(charges).toBe(shape.charges)
    // A new call: the row and its by-buyer index entry, then the derived facts' one upsert of unindexed columns.
    expect(byTable.calls).toBe(3 * shape.n)
    // One applied-set row per charge (WITHOUT ROWID: the row is its key).
    expect(byTable.projection_applied).toBe(shape.charges)
    // One row per buyer charged in the batch (a new buyer's row too: WITHOUT ROWID, migration 0033 — a rowid table wrote 2).
    expect(byTable.buyer_budgets).toBe(shape.chargedBuyers)
  })

  it("the projection stage's rows per event, by table: a call's facts in one batch (when both relays' messages meet in one batch)", async () => {
    const shape = await benchShape()
    const { byTable, charges } = await measure("in one batch, as the bench", shape, [[...shape.outcomes, ...shape.derived]])
    expect(charges).toBe(shape.charges)
    // The call's facts folded into one upsert: the row and its index entry.
    expect(byTable.calls).toBe(2 * shape.n)
    expect(byTable.projection_applied).toBe(shape.charges)
    expect(byTable.buyer_budgets).toBe(shape.chargedBuyers)
  })
})
