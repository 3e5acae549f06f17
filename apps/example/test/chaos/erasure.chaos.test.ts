/**
 * Erasure under faults (issue 38, `npm run chaos`): four buyers' calls with phone numbers (`call.completed` v3, the
 * phone personal data of `buyer_id`) and contact notes (the test Worker's `test.contact.noted`, some large enough to
 * be offloaded to R2) flow in; then buyer A is erased (`POST /v1/subjects/:subject/erase`) while the stores go away
 * mid-way — the test Worker's handlers run on bindings refusing their first calls and then failing a share of them
 * (HandlerFaults.ts: D1, R2 and the tenant's key store) — and waves of the other buyers' events keep flowing,
 * their POSTs retried by the client as a producer would (same idempotency keys). A failed erasure is resumed by a
 * new request, as the docs say. Once it has ended `erased` (faults removed, queues drained):
 *
 * - the other buyers: every event accepted has its facts in the facts copy once (0 lost, 0 doubled), their `calls`
 *   rows exact, their phones readable over HTTP;
 * - buyer A: its phone nowhere in plaintext — every row of every table of both D1 databases, every table of the
 *   tenant's ledger shard objects and of its key store object (runInDurableObject), every R2 object — its stream
 *   reads `[erased]`, its `calls` rows are masked to `[erased]`.
 *
 * Prints a `SCORECARD` line and asserts `passed`.
 */
import { runInDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { afterAll, describe, expect, it } from "vitest"
import { Shards } from "@factline/core/runtime"
import { maskPhone } from "../../src/calls/Calls.js"
import { drain } from "../Drain.js"
import * as HandlerFaults from "../HandlerFaults.js"
import { callCompleted, eventually, postEvents, request, tokenA, unique } from "../helpers.js"
import { overrideSettings } from "../worker.js"

const tenant = "tenant-a"
const score = (fields: Record<string, unknown>) => console.log(`SCORECARD ${JSON.stringify(fields)}`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const digits = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 10)).join("")

const api = async (method: string, path: string) => {
  const response = await request(path, { method, token: tokenA })
  return { status: response.status, body: await response.json<any>().catch(() => null) }
}

/** POSTs events until they are accepted (a 202), as a producer retries; how many tries it took. */
const postUntilAccepted = async (events: ReadonlyArray<unknown>) => {
  let last = ""
  for (let tries = 1; tries <= 40; tries++) {
    const response = await postEvents({ events })
    if (response.status === 202) return tries
    last = `${response.status} ${(await response.text()).slice(0, 300)}`
    await sleep(100)
  }
  throw new Error(`the events were never accepted: ${last}`)
}

const run = unique("erx")
const who = ["a", "b", "c", "d"] as const
type Who = (typeof who)[number]
const buyer = (w: Who) => `${run}_buyer_${w}`
const phones: Record<Who, string> = { a: `+44 7700 9${digits(5)}`, b: `+1 415 55${digits(1)} ${digits(4)}`, c: `+33 6 12 ${digits(2)} ${digits(2)} ${digits(2)}`, d: `+49 151 ${digits(8)}` }
const call = (w: Who, i: number) =>
  callCompleted({ schema_version: 3 }, { call_id: `${run}_c_${w}${i}`, buyer_id: buyer(w), duration_s: 90, price_cents: 100 + i, caller_phone: phones[w] })
/** A contact note; `large`: a note long enough that its payload is offloaded to R2. */
const note = (w: Who, i: number, large: boolean) => ({
  schema_version: 1, message_type: "test.contact.noted", tenant_id: tenant, subject: `${run}_n_${w}${i}`,
  idempotency_key: `${run}_note_${w}${i}`, payload: { buyer_id: buyer(w), caller_phone: phones[w], ...(large ? { note: "n".repeat(70_000) } : {}) }
})

type Event = ReturnType<typeof call> | ReturnType<typeof note>
/** The facts one event makes: a call 3 (outcome, qualification, charge: 90 s qualifies), a note 1 (contact_noted). */
const factsOf = (e: Event) => (e.message_type === "call.completed" ? 3 : 1)

// ---- what the stores hold ----------------------------------------------------------------------------------------

const text = (value: unknown): string =>
  value instanceof ArrayBuffer ? new TextDecoder().decode(value) : ArrayBuffer.isView(value) ? new TextDecoder().decode(value as Uint8Array) : typeof value === "string" ? value : JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v)) ?? ""

/** Where `needle` is stored in plaintext: every row of every D1 table, every shard and key store table and KV entry, every R2 object. */
const plaintextAt = async (needle: string) => {
  const at: Array<string> = []
  let d1Rows = 0
  for (const [name, db] of Object.entries({ DB: env.DB, FACTLINE_READ_DB_1: env.FACTLINE_READ_DB_1 })) {
    const tables = (await db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'").all<{ name: string }>()).results
    for (const { name: table } of tables) {
      for (const row of (await db.prepare(`SELECT * FROM "${table}"`).all<Record<string, unknown>>()).results) {
        d1Rows++
        for (const [column, value] of Object.entries(row)) if (text(value).includes(needle)) at.push(`d1:${name}.${table}.${column}`)
      }
    }
  }
  const objects = [...Array.from({ length: Shards.defaultShardsPerTenant }, (_, i) => `${tenant}/#${i}`), `${tenant}/#keys`]
  let objectRows = 0
  for (const name of objects) {
    const found = await runInDurableObject(env.LEDGER.get(env.LEDGER.idFromName(name)), async (_, state) => {
      const out: Array<string> = []
      const tables = state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'").toArray().map((r) => String(r.name))
      for (const table of tables) {
        try {
          for (const row of state.storage.sql.exec(`SELECT * FROM "${table}"`).toArray()) {
            objectRows++
            for (const [column, value] of Object.entries(row)) if (text(value).includes(needle)) out.push(`do:${name}.${table}.${column}`)
          }
        } catch {
          // workerd refuses reads of its own _cf_ tables: their KV entries are read below
        }
      }
      for (const [key, value] of await state.storage.list()) if (text(value).includes(needle) || key.includes(needle)) out.push(`do:${name}.kv.${key}`)
      return out
    })
    at.push(...found)
  }
  let objectsRead = 0
  let cursor: string | undefined
  do {
    const page = await env.PAYLOADS.list(cursor === undefined ? {} : { cursor })
    for (const o of page.objects) {
      objectsRead++
      if (new TextDecoder().decode(await (await env.PAYLOADS.get(o.key))!.arrayBuffer()).includes(needle) || o.key.includes(needle)) at.push(`r2:${o.key}`)
    }
    cursor = page.truncated ? page.cursor : undefined
  } while (cursor !== undefined)
  return { at, d1Rows, objectRows, objectsRead }
}

const factCounts = async (streams: ReadonlyArray<string>) =>
  (await env.DB.prepare("SELECT COUNT(*) AS n, COUNT(DISTINCT fact_id) AS distinct_ids FROM facts WHERE tenant_id = ? AND stream IN (SELECT value FROM json_each(?))")
    .bind(tenant, JSON.stringify(streams)).first<{ n: number; distinct_ids: number }>())!

const callRows = async (w: Who) =>
  (await env.DB.prepare("SELECT call_id, caller_phone_masked FROM calls WHERE tenant_id = ? AND buyer_id = ? ORDER BY call_id").bind(tenant, buyer(w)).all<{ call_id: string; caller_phone_masked: string | null }>()).results

const streamPhones = async (stream: string) => {
  const got = await api("GET", `/v1/streams/${encodeURIComponent(stream)}/facts`)
  expect(got.status, JSON.stringify(got.body)).toBe(200)
  return (got.body.facts as Array<{ type: string; data: Record<string, unknown> }>).filter((f) => "caller_phone" in f.data).map((f) => f.data.caller_phone)
}

afterAll(() => {
  HandlerFaults.uninstall()
  overrideSettings(undefined)
})

describe("chaos: erasure under faults", () => {
  it("erasing one buyer while D1, R2 and the key store refuse mid-way and other buyers' events flow: 0 lost, 0 doubled, the erased phone nowhere", async () => {
    // The key cache's bound (what the erasure waits out before it cleans) 1 s instead of 60 s for this case.
    overrideSettings({ FACTLINE_KEY_CACHE_SECONDS: "1" })
    // Before the erasure: every buyer's calls and notes (one large note each: offloaded to R2), accepted and consumed.
    const before: Array<Event> = who.flatMap((w) => [call(w, 0), call(w, 1), note(w, 0, true), note(w, 1, false)])
    await postUntilAccepted(before)
    await drain({ timeoutMs: 120_000 })
    expect((await callRows("a")).map((r) => r.caller_phone_masked)).toEqual([maskPhone(phones.a), maskPhone(phones.a)])

    // The stores go away mid-way: the first calls of each refused, then a share failing, while the erasure runs.
    const faults = HandlerFaults.install({ d1: { first: 4, rate: 0.04 }, r2: { first: 2, rate: 0.1 }, keyStore: { first: 3, rate: 0.1 }, seed: 38 })
    let erasePosts = 0
    let resumed = 0
    const erase = async () => {
      for (;;) {
        erasePosts++
        const got = await api("POST", `/v1/subjects/${buyer("a")}/erase`)
        if (got.status === 202) return got.body
        if (erasePosts > 60) throw new Error(`the erasure was never started: ${JSON.stringify(got.body)}`)
        await sleep(100)
      }
    }
    const started = await erase()
    const others = ["b", "c", "d"] as const
    const during: Array<Event> = []
    let postTries = 0
    let phase = started.phase as string
    const phasesSeen = new Set<string>([phase])
    // Waves of the other buyers' events while the erasure runs (it waits out the 1 s cache bound between its phases).
    for (let wave = 0; wave < 8 || (phase !== "erased" && wave < 60); wave++) {
      const events = others.flatMap((w) => [call(w, 10 + wave), ...(wave % 3 === 0 ? [note(w, 10 + wave, wave % 6 === 0)] : [])])
      during.push(...events)
      postTries += await postUntilAccepted(events)
      const status = await api("GET", `/v1/subjects/${buyer("a")}/erasure`)
      if (status.status === 200) {
        phase = status.body.phase
        phasesSeen.add(phase)
        // A failed erasure (a step failing on its last attempt) is resumed by a new request, from where it failed.
        if (phase === "failed") {
          resumed++
          await erase()
        }
      }
      await sleep(300)
    }
    const ended = await eventually(async () => {
      await drain({ timeoutMs: 60_000 })
      const status = await api("GET", `/v1/subjects/${buyer("a")}/erasure`)
      if (status.status !== 200) return undefined
      phasesSeen.add(status.body.phase)
      if (status.body.phase === "failed") {
        resumed++
        await erase()
        return undefined
      }
      return status.body.phase === "erased" ? status.body : undefined
    }, 240_000, "the erasure to end erased")
    HandlerFaults.uninstall()
    await drain({ timeoutMs: 120_000 })
    overrideSettings(undefined)

    // The other buyers: every accepted event's facts once.
    const otherEvents = [...before.filter((e) => e.payload.buyer_id !== buyer("a")), ...during]
    const expected = otherEvents.reduce((n, e) => n + factsOf(e), 0)
    const counts = await factCounts(otherEvents.map((e) => e.subject))
    const lost = Math.max(0, expected - counts.distinct_ids)
    const doubled = counts.n - counts.distinct_ids
    const otherCalls = Object.fromEntries(await Promise.all(others.map(async (w) => [w, await callRows(w)] as const)))
    const callsExact = others.every((w) => {
      const posted = otherEvents.filter((e) => e.message_type === "call.completed" && e.payload.buyer_id === buyer(w)).length
      const rows = otherCalls[w]!
      return rows.length === posted && rows.every((r) => r.caller_phone_masked === maskPhone(phones[w]))
    })
    const otherPhones = await Promise.all(others.map(async (w) => (await streamPhones(`${run}_c_${w}0`)).every((p) => p === phones[w])))
    // Buyer A: nowhere in plaintext; its stream and rows read the marker.
    const found = await plaintextAt(phones.a)
    const aStream = await streamPhones(`${run}_c_a0`)
    const aRows = await callRows("a")
    const deadLetters = (await env.DB.prepare("SELECT COUNT(*) AS n FROM dead_messages WHERE tenant_id = ? AND idempotency_key LIKE ?").bind(tenant, `%${run}%`).first<{ n: number }>())!.n
    const erasureSteps = (await env.DB.prepare("SELECT COUNT(*) AS n FROM dead_messages WHERE idempotency_key LIKE ?").bind(`${started.erasure_id}:%`).first<{ n: number }>())!.n
    const injected = Object.values(faults).reduce((n, k) => n + k.refused + k.lostReplies, 0)

    const passed = lost === 0 && doubled === 0 && deadLetters === 0 && callsExact && otherPhones.every(Boolean) && found.at.length === 0 &&
      aStream.length > 0 && aStream.every((p) => p === "[erased]") && aRows.length === 2 && aRows.every((r) => r.caller_phone_masked === "[erased]") &&
      faults.d1.refused > 0 && faults.r2.refused > 0 && faults.keyStore.refused > 0
    score({
      case: "erasure under faults", passed, messages_sent: before.length + during.length, facts_expected: expected, facts_found: counts.distinct_ids,
      duplicates_found: doubled, messages_lost: lost, dlq_expected: 0, dlq_found: deadLetters,
      erased_plaintext_found: found.at, d1_rows_read: found.d1Rows, shard_and_key_store_rows_read: found.objectRows, r2_objects_read: found.objectsRead, erased_phase: ended.phase,
      phases_seen: [...phasesSeen], erasure_resumed: resumed, erasure_steps_dead_lettered: erasureSteps, erase_posts: erasePosts, event_posts: postTries, event_waves_posted: during.length,
      removed: ended.removed, faults, faults_injected: injected
    })
    expect(found.at).toEqual([])
    expect({ lost, doubled, deadLetters, callsExact }).toEqual({ lost: 0, doubled: 0, deadLetters: 0, callsExact: true })
    expect(otherPhones).toEqual([true, true, true])
    expect(aStream.every((p) => p === "[erased]")).toBe(true)
    expect(aRows.map((r) => r.caller_phone_masked)).toEqual(["[erased]", "[erased]"])
    expect(passed).toBe(true)
  }, 600_000)
})
