/**
 * Personal data end to end (issue 38), on the real local Queues, D1, Durable Objects and R2: two buyers' phone
 * numbers (personal data, subject `buyer_id`) go in over HTTP — `call.completed` v3 (the example's calls module:
 * outcome, qualification, charge, the `calls` projection showing the last four digits, the `charge.created`
 * webhook) and the test Worker's `test.contact.noted` (a handler, a processor, the `contact.noted` webhook to a
 * real receiver, a payload large enough to be offloaded to R2, and a refused note: a run with an error and a dead
 * letter) — flow through every queue, and a day of facts is archived to Parquet in R2. Then every row of every
 * table of every D1 database, every table of every ledger shard object and of the tenant's key store object, and
 * every R2 object (Parquet parts decoded too) are read back (queues: nothing left on any after a drain, by Drain's
 * count of every send — the local broker's queues themselves cannot be read):
 *
 * - before any erasure, neither number is stored in plaintext anywhere but where product code's own output put it
 *   (the refused note's error text, which names the number); the stored values are sealed (`pd1.…`), and every
 *   reader product code has — handler, processor, decider, projection, webhook receiver, the stream over HTTP —
 *   sees the plaintext;
 * - after erasing buyer A (`POST /v1/subjects/:subject/erase`, followed to its end): A's number is nowhere, B's
 *   data is untouched and readable; A's stream reads `[erased]`; a rebuild of `calls` gives the rows as they were
 *   minus the masking erasure did; a decider folding A's stream still decides; A's replayed dead letter reaches
 *   the handler with the marker.
 *
 * Finally it greps Miniflare's raw state files (scripts/StateFiles.mjs) and reports — does not assert — which
 * files still hold A's number: SQLite free pages and write-ahead logs, and blobs, that no SQL or R2 read reaches.
 */
import { runInDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { Effect } from "effect"
import { parquetReadObjects } from "hyparquet/src/index.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Personal } from "@factline/core"
import { Archive, Shards, Sql } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { drain, snapshot as queueTraffic } from "./Drain.js"
import { callCompleted, eventually, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { contactsSeen, refusedContacts } from "./TestModule.js"
import { overrideSettings, platform } from "./worker.js"

const tenant = "tenant-a"

const api = async (method: string, path: string, body?: unknown, token = tokenA) => {
  const response = await request(path, { method, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: await response.json<any>() }
}

// ---- What the stores hold, read back whole -------------------------------------------------------------------

/** Where a value was found: `d1:<db>.<table>.<column>`, `do:<object>.<table>.<column>`, `r2:<key>` (`#parquet`: in a decoded part). */
type Found = ReadonlyArray<string>

const text = (value: unknown): string =>
  value instanceof ArrayBuffer ? new TextDecoder().decode(value) : ArrayBuffer.isView(value) ? new TextDecoder().decode(value as Uint8Array) : typeof value === "string" ? value : JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v)) ?? ""

/** Every row of every table of every D1 database, as (location prefix, row). */
const everyD1Row = async () => {
  const out: Array<{ readonly at: string; readonly row: Record<string, unknown> }> = []
  for (const [name, db] of Object.entries({ DB: env.DB, FACTLINE_READ_DB_1: env.FACTLINE_READ_DB_1 })) {
    const tables = (await db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'").all<{ name: string }>()).results
    for (const { name: table } of tables) {
      for (const row of (await db.prepare(`SELECT * FROM "${table}"`).all<Record<string, unknown>>()).results) out.push({ at: `d1:${name}.${table}`, row })
    }
  }
  return out
}

/** The tenant's ledger shard objects and its key store object (`<tenant>/#keys`, the LedgerShard class). */
const objectNames = () => [...Array.from({ length: Shards.defaultShardsPerTenant }, (_, i) => `${tenant}/#${i}`), `${tenant}/#keys`]

/** Every row of every table of a Durable Object's SQLite storage (its `_cf_` tables too, where readable), and its KV entries. */
const everyObjectRow = (name: string) =>
  runInDurableObject(env.LEDGER.get(env.LEDGER.idFromName(name)), async (_, state) => {
    const out: Array<{ readonly at: string; readonly row: Record<string, unknown> }> = []
    const tables = state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'").toArray().map((r) => String(r.name))
    for (const table of tables) {
      try {
        for (const row of state.storage.sql.exec(`SELECT * FROM "${table}"`).toArray()) out.push({ at: `do:${name}.${table}`, row: row as Record<string, unknown> })
      } catch {
        // workerd refuses reads of its own _cf_ tables: their KV entries are read below
      }
    }
    for (const [key, value] of await state.storage.list()) out.push({ at: `do:${name}.kv`, row: { key, value } })
    return { tables, rows: out }
  })

/** Every R2 object: its key, its bytes as text, and a Parquet part's rows decoded. */
const everyObject = async () => {
  const out: Array<{ readonly key: string; readonly raw: string; readonly decoded: string | undefined }> = []
  let cursor: string | undefined
  do {
    const page = await env.PAYLOADS.list(cursor === undefined ? {} : { cursor })
    for (const o of page.objects) {
      const file = await (await env.PAYLOADS.get(o.key))!.arrayBuffer()
      const decoded = o.key.endsWith(".parquet") ? text(await parquetReadObjects({ file })) : undefined
      out.push({ key: o.key, raw: new TextDecoder().decode(file), decoded })
    }
    cursor = page.truncated ? page.cursor : undefined
  } while (cursor !== undefined)
  return out
}

interface Snapshot {
  readonly d1: Awaited<ReturnType<typeof everyD1Row>>
  readonly objects: ReadonlyArray<{ readonly at: string; readonly row: Record<string, unknown> }>
  readonly objectTables: Readonly<Record<string, ReadonlyArray<string>>>
  readonly r2: Awaited<ReturnType<typeof everyObject>>
  /**
   * Queues with messages still on them. The local broker's queues cannot be read; Drain's counting wrapper around
   * every send says how many are sent and not yet settled — after a drain, none.
   */
  readonly queuesInFlight: ReadonlyArray<string>
}

const snapshot = async (): Promise<Snapshot> => {
  const objects: Array<{ readonly at: string; readonly row: Record<string, unknown> }> = []
  const objectTables: Record<string, ReadonlyArray<string>> = {}
  for (const name of objectNames()) {
    const { tables, rows } = await everyObjectRow(name)
    objectTables[name] = tables
    objects.push(...rows)
  }
  const queuesInFlight = Object.entries(queueTraffic()).filter(([, t]) => t.inFlight > 0).map(([queue]) => queue)
  return { d1: await everyD1Row(), objects, objectTables, r2: await everyObject(), queuesInFlight }
}

/** Every place a snapshot holds `needle`: column by column for rows, object by object for R2. */
const where = (s: Snapshot, needle: string): Found => {
  const found = new Set<string>()
  for (const { at, row } of [...s.d1, ...s.objects]) {
    for (const [column, value] of Object.entries(row)) if (text(value).includes(needle)) found.add(`${at}.${column}`)
  }
  for (const { key, raw, decoded } of s.r2) {
    if (raw.includes(needle)) found.add(`r2:${key}`)
    if (decoded?.includes(needle)) found.add(`r2:${key}#parquet`)
  }
  return [...found].sort()
}

/** Where product code's own output put a phone number in plaintext: the refused note's error text. */
const productOutput = (at: string) => /^d1:DB\.(runs|dead_messages)\.(error|last_error)$/.test(at)

// ---- The data -------------------------------------------------------------------------------------------------

const digits = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 10)).join("")
const run = unique("pd")
const buyers = { a: `${run}_buyer_a`, b: `${run}_buyer_b` } as const
const phones = { a: `+44 7700 9${digits(5)}`, b: `+1 415 55${digits(1)} ${digits(4)}` } as const
const lastFour = (phone: string) => phone.replace(/\D/g, "").slice(-4)
const hookPath = `/hooks/ok-personal-${run}`

type Who = keyof typeof buyers
const calls = (who: Who) => [
  callCompleted({ schema_version: 3 }, { buyer_id: buyers[who], duration_s: 90, price_cents: 500, caller_phone: phones[who] }),
  callCompleted({ schema_version: 3 }, { buyer_id: buyers[who], duration_s: 20, price_cents: 100, caller_phone: phones[who] })
]
const contact = (who: Who, extra: Record<string, unknown> = {}) => ({
  schema_version: 1, message_type: "test.contact.noted", tenant_id: tenant, subject: `contact_${buyers[who]}`,
  idempotency_key: unique("contact"), payload: { buyer_id: buyers[who], caller_phone: phones[who], ...extra }
})
const events = {
  a: { calls: calls("a"), noted: contact("a", { note: "n".repeat(70_000) }), refused: contact("a") },
  b: { calls: calls("b"), noted: contact("b"), refused: contact("b") }
}

const received = async (): Promise<Array<{ body: string }>> =>
  (await fetch(`${env.TEST_RECEIVER_URL}/received?path=${encodeURIComponent(hookPath)}`)).json()
const streamFacts = async (subject: string) => {
  const got = await api("GET", `/v1/streams/${subject}/facts`)
  expect(got.status, JSON.stringify(got.body)).toBe(200)
  return got.body.facts as Array<{ type: string; data: Record<string, unknown> }>
}
const callRows = async () =>
  (await env.DB.prepare("SELECT * FROM calls WHERE tenant_id = ? AND buyer_id IN (?, ?) ORDER BY call_id").bind(tenant, buyers.a, buyers.b).all<Record<string, unknown>>()).results
const deadLetters = async (who: Who) =>
  (await api("GET", `/v1/dlq?type=test.contact.noted&limit=200`)).body.data.filter((r: any) => r.idempotency_key === events[who].refused.idempotency_key)

/** Today's facts of the tenant, archived to a Parquet part in R2 (the archive's own chunk step: the day is inside the window). */
const archiveToday = () =>
  platform.runtime(env as unknown as PlatformEnv).runPromise(
    Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) =>
      Effect.provideService(Archive.archiveChunk(tenant, new Date().toISOString().slice(0, 10), Archive.rowsPerPart), Sql.ReadDatabase, sql)) as Effect.Effect<number, unknown, never>
  )

// ---- The run --------------------------------------------------------------------------------------------------

let before: Snapshot
let callRowsBefore: Array<Record<string, unknown>>

beforeAll(async () => {
  // The key cache's bound (what an erasure waits out before it cleans) down from 60 s to 1 s for this file.
  overrideSettings({ FACTLINE_KEY_CACHE_SECONDS: "1" })
  const endpoint = await api("POST", "/v1/webhooks/endpoints", { url: `${env.TEST_RECEIVER_URL}${hookPath}`, event_types: ["charge.created", "contact.noted"] })
  expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(201)
  refusedContacts.add(events.a.refused.idempotency_key)
  refusedContacts.add(events.b.refused.idempotency_key)
  const all = [...events.a.calls, events.a.noted, events.a.refused, ...events.b.calls, events.b.noted, events.b.refused]
  const posted = await postEvents({ events: all })
  expect(posted.status, JSON.stringify(await posted.clone().json())).toBe(202)
  await drain({ timeoutMs: 90_000 })
  expect(await archiveToday()).toBeGreaterThan(0)
  before = await snapshot()
  callRowsBefore = await callRows()
}, 180_000)

afterAll(() => {
  overrideSettings(undefined)
  refusedContacts.clear()
})

describe("personal data, sealed where it enters and erasable", () => {
  it("before any erasure: no phone number in plaintext in any D1 row, shard or key store table, or R2 object but product code's error text; every reader sees plaintext", async () => {
    // Everything went where it should: rows in D1, facts in the shards, a Parquet part, an offloaded payload, dead letters, runs.
    const objectsWithTables = Object.entries(before.objectTables).filter(([, tables]) => tables.length > 0).map(([name]) => name)
    expect(objectsWithTables, "the key store object holds tables").toContain(`${tenant}/#keys`)
    expect(objectsWithTables.length).toBeGreaterThan(1)
    expect(before.r2.filter((o) => o.key.startsWith(`${tenant}/archive/facts/`)).length, before.r2.map((o) => o.key).join(", ")).toBeGreaterThan(0)
    expect(before.r2.filter((o) => o.key.startsWith(`_payloads/${tenant}/`)).length, before.r2.map((o) => o.key).join(", ")).toBeGreaterThan(0)
    expect(await deadLetters("a")).toHaveLength(1)
    expect(await deadLetters("b")).toHaveLength(1)
    expect(before.queuesInFlight, "messages left on a queue").toEqual([])

    for (const who of ["a", "b"] as const) {
      const found = where(before, phones[who])
      console.log(`before erasure, buyer ${who}'s phone in plaintext at: ${found.join(", ") || "nowhere"}`)
      expect(found.filter((at) => !productOutput(at)), `buyer ${who}'s phone in plaintext`).toEqual([])
      // Product code's error text names the number: a run and a dead letter hold it (erasure blanks them).
      expect(found.some(productOutput), `buyer ${who}'s refused note's error text`).toBe(true)
    }
    // Stored sealed: the ledger's facts, the D1 facts copy's archived part, the dead letter's message.
    const sealed = where(before, "pd1.")
    console.log(`sealed values (pd1.) at: ${sealed.join(", ")}`)
    expect(sealed.some((at) => at.startsWith(`do:${tenant}/#`) && !at.startsWith(`do:${tenant}/#keys`)), "sealed in a ledger shard").toBe(true)
    expect(sealed.some((at) => at.endsWith("#parquet")), "sealed in the archive").toBe(true)
    expect(sealed.some((at) => at.startsWith("d1:DB.dead_messages")), "sealed in a dead letter").toBe(true)

    // Every reader sees plaintext: the stream over HTTP, the projection (last four digits), handler, processor, webhook.
    for (const who of ["a", "b"] as const) {
      const outcome = (await streamFacts(events[who].calls[0]!.subject)).find((f) => f.type === "outcome")
      expect(outcome?.data.caller_phone, `buyer ${who}'s outcome over HTTP`).toBe(phones[who])
      const noted = (await streamFacts(events[who].noted.subject)).find((f) => f.type === "contact_noted")
      expect(noted?.data.caller_phone, `buyer ${who}'s contact_noted over HTTP`).toBe(phones[who])
      for (const by of ["handler", "processor"]) {
        expect(contactsSeen.filter((s) => s.by === by && s.buyer_id === buyers[who]).map((s) => s.caller_phone), `${by} of buyer ${who}`).toContain(phones[who])
      }
    }
    // The calls projection: four rows, each phone shown as its last four digits only.
    expect(callRowsBefore).toHaveLength(4)
    for (const row of callRowsBefore) expect(row.caller_phone_masked).toBe(`•••• ${lastFour(row.buyer_id === buyers.a ? phones.a : phones.b)}`)
    const deliveries = (await received()).map((d) => JSON.parse(d.body) as { type: string; data: Record<string, unknown> })
    for (const who of ["a", "b"] as const) {
      expect(deliveries.filter((d) => d.type === "contact.noted" && d.data.buyer_id === buyers[who]).map((d) => d.data.caller_phone), `the receiver, buyer ${who}`).toEqual([phones[who]])
      expect(deliveries.filter((d) => d.type === "charge.created" && d.data.buyer_id === buyers[who])).toHaveLength(1)
    }
  })

  it("after erasing buyer A: A's number nowhere (every D1 row, shard and key store table, R2 object); B intact and readable; reads say [erased]; a rebuild gives the same rows; a decider still decides; a replayed dead letter carries the marker", async () => {
    const subject = buyers.a
    expect((await api("GET", `/v1/subjects/${subject}/erasure`)).status).toBe(404)
    const started = await api("POST", `/v1/subjects/${subject}/erase`)
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    const id = started.body.erasure_id as string
    // Driven to its end: its steps are batch-queue messages (one delayed by the key cache's bound, 1 s here).
    const done = await eventually(async () => {
      await drain({ timeoutMs: 60_000 })
      const got = await api("GET", `/v1/subjects/${subject}/erasure`)
      if (got.body.phase === "failed") throw new Error(`the erasure failed: ${got.body.error}`)
      return got.body.phase === "erased" ? got.body : undefined
    }, 90_000, "the erasure to end")
    console.log(`erasure of buyer A: ${JSON.stringify(done)}`)
    expect(done).toMatchObject({ erasure_id: id, subject, error: null, audit_fact_id: expect.any(String) })
    expect(done.generations_erased.length).toBeGreaterThan(0)
    // Asked again: the same, finished erasure.
    expect((await api("POST", `/v1/subjects/${subject}/erase`)).body).toMatchObject({ erasure_id: id, phase: "erased" })
    await drain({ timeoutMs: 60_000 })

    // A's number nowhere; B's exactly where it was (product code's error text included); the sealed values still there.
    const after = await snapshot()
    expect(where(after, phones.a), "buyer A's phone in plaintext after the erasure").toEqual([])
    expect(after.queuesInFlight, "messages left on a queue").toEqual([])
    expect(where(after, phones.b), "buyer B's phone").toEqual(where(before, phones.b))
    expect(where(after, buyers.a).length, "buyer A's pseudonymous id stays (the subject of its facts)").toBeGreaterThan(0)

    // Reads: A's personal fields are the marker, every time; B's are its number.
    for (let i = 0; i < 2; i++) {
      expect((await streamFacts(events.a.calls[0]!.subject)).find((f) => f.type === "outcome")?.data.caller_phone).toBe(Personal.erased)
      expect((await streamFacts(events.a.noted.subject)).find((f) => f.type === "contact_noted")?.data.caller_phone).toBe(Personal.erased)
    }
    expect((await streamFacts(events.b.calls[0]!.subject)).find((f) => f.type === "outcome")?.data.caller_phone).toBe(phones.b)
    expect((await streamFacts(events.b.noted.subject)).find((f) => f.type === "contact_noted")?.data.caller_phone).toBe(phones.b)
    const exportA = await api("GET", `/v1/subjects/${buyers.a}/export`)
    const exportB = await api("GET", `/v1/subjects/${buyers.b}/export`)
    expect(exportA.status).toBe(200)
    expect(JSON.stringify(exportA.body)).not.toContain(phones.a)
    // (Its facts come from the D1 facts copy, which this test archived: only the projections' rows are left to export.)
    expect(exportB.body.projections.find((p: any) => p.projection === "calls").rows.map((r: any) => r.caller_phone_masked)).toEqual([`•••• ${lastFour(phones.b)}`, `•••• ${lastFour(phones.b)}`])
    expect(exportA.body.projections.find((p: any) => p.projection === "calls").rows.map((r: any) => r.caller_phone_masked)).toEqual([Personal.erased, Personal.erased])

    // The calls projection: the rows as before, A's masked column the marker — and a rebuild from the ledger gives the same.
    const expected = callRowsBefore.map((r) => (r.buyer_id === buyers.a ? { ...r, caller_phone_masked: Personal.erased } : r))
    expect(await callRows()).toEqual(expected)
    const rebuild = await api("POST", "/v1/batches", { operation: "rebuild", projection: "calls" }, tokenPlatform)
    expect(rebuild.status, JSON.stringify(rebuild.body)).toBe(202)
    await drain({ timeoutMs: 90_000 })
    expect((await api("GET", `/v1/batches/${rebuild.body.batch_id}`, undefined, tokenPlatform)).body).toMatchObject({ status: "completed" })
    expect(await callRows()).toEqual(expected)

    // A's dead letter, replayed once the handler takes it: the handler sees the marker, and appends it.
    const [letter] = await deadLetters("a")
    expect(letter).toBeDefined()
    expect(JSON.stringify(letter)).not.toContain(phones.a)
    refusedContacts.delete(events.a.refused.idempotency_key)
    const replayed = await api("POST", `/v1/dlq/${letter.id}/replay`)
    expect(replayed.status, JSON.stringify(replayed.body)).toBe(202)
    await drain({ timeoutMs: 60_000 })
    const seenByHandler = contactsSeen.filter((s) => s.by === "handler" && s.buyer_id === buyers.a).map((s) => s.caller_phone)
    expect(seenByHandler.at(-1)).toBe(Personal.erased)
    expect((await streamFacts(events.a.noted.subject)).filter((f) => f.type === "contact_noted").map((f) => f.data.caller_phone)).toEqual([Personal.erased, Personal.erased])

    // A decider folding A's erased stream still decides (and sees the marker); B's sees B's number.
    const check = (who: Who) => ({
      schema_version: 1, message_type: "test.contact.check", tenant_id: tenant, subject: events[who].noted.subject,
      idempotency_key: unique("check"), payload: { buyer_id: buyers[who] }
    })
    expect((await postEvents({ events: [check("a"), check("b")] })).status).toBe(202)
    await drain({ timeoutMs: 60_000 })
    expect((await streamFacts(events.a.noted.subject)).filter((f) => f.type === "contact_checked").map((f) => f.data)).toEqual([{ buyer_id: buyers.a, notes: 2, phone_erased: true }])
    expect((await streamFacts(events.b.noted.subject)).filter((f) => f.type === "contact_checked").map((f) => f.data)).toEqual([{ buyer_id: buyers.b, notes: 1, phone_erased: false }])
    expect(contactsSeen.filter((s) => s.by === "decider").map((s) => [s.buyer_id, s.caller_phone])).toEqual([[buyers.a, Personal.erased], [buyers.b, phones.b]].sort((x, y) => (x[0]! < y[0]! ? -1 : 1)))

    // After all of it, still nowhere.
    const end = await snapshot()
    expect(where(end, phones.a), "buyer A's phone in plaintext at the end").toEqual([])
    expect(where(end, phones.b).filter((at) => !productOutput(at)), "buyer B's phone outside product code's error text").toEqual([])

    // What the raw local state files still hold (reported, not asserted): SQLite free pages and write-ahead logs,
    // blob files — below every SQL and R2 read above.
    for (const [who, phone] of [["A (erased)", phones.a], ["B", phones.b]] as const) {
      const grep = await (await fetch(`${env.TEST_STATE_FILES_URL}/grep?needle=${encodeURIComponent(phone)}`)).json<{ roots: Array<string>; files: number; bytes: number; hits: Array<{ file: string; count: number; size: number }> }>()
      console.log(
        `raw local state, buyer ${who}'s phone: ${grep.files} files (${grep.bytes} bytes) under ${grep.roots.length} roots; ` +
          (grep.hits.length === 0 ? "found in none" : `found in ${grep.hits.length}: ${grep.hits.map((h) => `${h.file.replace(/^.*?miniflare-[0-9a-f]+\//, "")} ×${h.count} (${h.size} B)`).join("; ")}`)
      )
    }
  }, 300_000)
})
