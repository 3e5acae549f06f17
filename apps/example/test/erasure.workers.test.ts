/**
 * Erasing a data subject in one call (issue 38 part 3), on the real local Queues, D1, Durable Objects and R2: two
 * buyers' calls with phone numbers (`call.completed` v3: personal data, subject `buyer_id`; the `calls` projection
 * masks the phone on erasure) and a refused contact note each (the test Worker's `test.contact.noted`: a run with
 * an error text and a dead letter naming the number). Buyer A is erased: the operation's phases run to `erased`
 * with a report per store, A's key is gone (its stream reads `[erased]`), A's projection rows are masked, A's run
 * and dead letter texts blanked, the `subject_erased` fact appended without personal data; a second call answers
 * the same erasure and redoes nothing; buyer B is untouched throughout. The export answers each buyer's data.
 */
import { env } from "cloudflare:workers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, eventually, postEvents, request, tokenA, unique } from "./helpers.js"
import { refusedContacts } from "./TestModule.js"
import { overrideSettings } from "./worker.js"

const tenant = "tenant-a"
const api = async (method: string, path: string, body?: unknown) => {
  const response = await request(path, { method, token: tokenA, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: await response.json<any>() }
}
/** Exports (batch `export`) run to `succeeded`: their ids. */
const exported = async (...bodies: Array<Record<string, unknown>>) => {
  const ids: Array<string> = []
  for (const body of bodies) {
    const started = await api("POST", "/v1/batches", { operation: "export", ...body })
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    ids.push(started.body.batch_id)
  }
  await drain({ timeoutMs: 60_000 })
  for (const id of ids) expect((await api("GET", `/v1/batches/${id}`)).body.status).toBe("succeeded")
  return ids
}
const outputText = async (id: string) => {
  const response = await request(`/v1/batches/${id}/output`, { token: tokenA })
  return { status: response.status, text: await response.text() }
}
const outputParts = async (id: string) => (await env.PAYLOADS.list({ prefix: `${tenant}/batches/${id}/output/` })).objects.length

const digits = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 10)).join("")
const run = unique("er")
const buyers = { a: `${run}_buyer_a`, b: `${run}_buyer_b` } as const
const phones = { a: `+44 7700 9${digits(5)}`, b: `+1 415 55${digits(1)} ${digits(4)}` } as const
type Who = keyof typeof buyers
const calls = (who: Who) => [
  callCompleted({ schema_version: 3 }, { buyer_id: buyers[who], duration_s: 90, price_cents: 500, caller_phone: phones[who] }),
  callCompleted({ schema_version: 3 }, { buyer_id: buyers[who], duration_s: 20, price_cents: 100, caller_phone: phones[who] })
]
const refused = (who: Who) => ({
  schema_version: 1, message_type: "test.contact.noted", tenant_id: tenant, subject: `contact_${buyers[who]}`,
  idempotency_key: unique("contact"), payload: { buyer_id: buyers[who], caller_phone: phones[who] }
})
const events = { a: { calls: calls("a"), refused: refused("a") }, b: { calls: calls("b"), refused: refused("b") } }

const rows = async <T = Record<string, unknown>>(sql: string, ...params: Array<unknown>) => (await env.DB.prepare(sql).bind(...params).all<T>()).results
const callRows = (who: Who) => rows<{ caller_phone_masked: string | null }>("SELECT * FROM calls WHERE tenant_id = ? AND buyer_id = ? ORDER BY call_id", tenant, buyers[who])
const outcomePhone = async (who: Who) => {
  const got = await api("GET", `/v1/streams/${events[who].calls[0]!.subject}/facts`)
  expect(got.status, JSON.stringify(got.body)).toBe(200)
  return (got.body.facts as Array<{ type: string; data: Record<string, unknown> }>).find((f) => f.type === "outcome")?.data.caller_phone
}
const erasureOf = (who: Who) => api("GET", `/v1/subjects/${buyers[who]}/erasure`)
const auditFacts = () => rows<{ body: string }>("SELECT body FROM facts WHERE tenant_id = ? AND type = 'subject_erased' AND json_extract(body, '$.subject') = ?", tenant, buyers.a)

let phoneTextsBefore: { runs: number; dead: number }
/** Export files made before the erasure: `kept` holds only B (made before A's data arrived), `held` hold A (calls as CSV, the facts as NDJSON). */
const exports = { kept: "", held: [] as Array<string> }

beforeAll(async () => {
  // The key cache's bound (what an erasure waits out before it cleans) down from 60 s to 1 s for this file.
  overrideSettings({ FACTLINE_KEY_CACHE_SECONDS: "1" })
  refusedContacts.add(events.a.refused.idempotency_key)
  refusedContacts.add(events.b.refused.idempotency_key)
  const first = await postEvents({ events: [...events.b.calls] })
  expect(first.status, JSON.stringify(await first.clone().json())).toBe(202)
  await drain({ timeoutMs: 90_000 })
  exports.kept = (await exported({ projection: "calls", format: "ndjson" }))[0]!
  const posted = await postEvents({ events: [...events.a.calls, events.a.refused, events.b.refused] })
  expect(posted.status, JSON.stringify(await posted.clone().json())).toBe(202)
  await drain({ timeoutMs: 90_000 })
  exports.held = await exported({ projection: "calls", format: "csv" }, { format: "ndjson" })
  const runs = await rows("SELECT error FROM runs WHERE tenant_id = ? AND data_subject = ? AND error LIKE ?", tenant, buyers.a, `%${phones.a}%`)
  const dead = await rows("SELECT last_error FROM dead_messages WHERE tenant_id = ? AND data_subject = ? AND last_error LIKE ?", tenant, buyers.a, `%${phones.a}%`)
  phoneTextsBefore = { runs: runs.length, dead: dead.length }
}, 180_000)

afterAll(() => {
  overrideSettings(undefined)
  refusedContacts.clear()
})

describe("erasing a data subject", () => {
  it("the writers record each buyer as the data subject of its runs and dead letters; nothing is erased yet", async () => {
    expect(phoneTextsBefore.runs, "A's refused note: a run whose error names the phone").toBeGreaterThan(0)
    expect(phoneTextsBefore.dead, "A's refused note: a dead letter whose error names the phone").toBeGreaterThan(0)
    expect((await erasureOf("a")).status).toBe(404)
    expect(await outcomePhone("a")).toBe(phones.a)
    const subjectExport = await api("GET", `/v1/subjects/${buyers.a}/export`)
    expect(subjectExport.status, JSON.stringify(subjectExport.body)).toBe(200)
    expect(subjectExport.body.facts.filter((f: any) => f.data.caller_phone === phones.a).length).toBeGreaterThanOrEqual(2)
    expect(subjectExport.body.projections.find((p: any) => p.projection === "calls")?.rows).toHaveLength(2)
    expect(subjectExport.body.covers).toContain("Not covered")
    // The export files: the kept one names B only, the held ones name A.
    const kept = await outputText(exports.kept)
    expect(kept.status).toBe(200)
    expect(kept.text).toContain(`"buyer_id":"${buyers.b}"`)
    expect(kept.text).not.toContain(buyers.a)
    for (const id of exports.held) {
      const held = await outputText(id)
      expect(held.status).toBe(200)
      expect(held.text).toContain(buyers.a)
    }
    expect((await outputText(exports.held[1]!)).text, "the facts export opens A's phone").toContain(phones.a)
  })

  it("erases buyer A through its phases to erased, with a report per store; A reads [erased] everywhere, B is untouched", async () => {
    const started = await api("POST", `/v1/subjects/${buyers.a}/erase`)
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    expect(started.body).toMatchObject({ tenant_id: tenant, subject: buyers.a, phase: "keys", requested_by: expect.any(String) })
    const seen = new Set<string>([started.body.phase])
    const done = await eventually(async () => {
      await drain({ timeoutMs: 30_000 })
      const got = await erasureOf("a")
      seen.add(got.body.phase)
      return got.body.phase === "erased" || got.body.phase === "failed" ? got.body : undefined
    }, 90_000, "the erasure to end")
    expect(done.error).toBeNull()
    expect(done.phase).toBe("erased")
    expect(done.erasure_id).toBe(started.body.erasure_id)
    expect(done.generations_erased.length).toBeGreaterThan(0)
    expect(Date.parse(done.clean_after) - Date.parse(done.keys_erased_at)).toBeGreaterThanOrEqual(1_000)
    expect(done.removed["projection:calls"]).toEqual({ masked: 2 })
    expect(done.removed.runs.blanked).toBeGreaterThan(0)
    expect(done.removed.dead_messages.blanked).toBeGreaterThan(0)
    expect(done.removed.exports).toEqual({ deleted: 2 })
    expect(done.audit_fact_id).toEqual(expect.any(String))
    expect(done.finished_at).toEqual(expect.any(String))

    // A's key is gone: its facts open as the marker; its rows are masked; its texts blanked.
    expect(await outcomePhone("a")).toBe("[erased]")
    expect((await callRows("a")).map((r) => r.caller_phone_masked)).toEqual(["[erased]", "[erased]"])
    expect(await rows("SELECT 1 FROM runs WHERE tenant_id = ? AND data_subject = ? AND (error IS NOT NULL OR body IS NOT NULL)", tenant, buyers.a)).toEqual([])
    const dead = await rows<{ last_error: string; stack: string | null }>("SELECT last_error, stack FROM dead_messages WHERE tenant_id = ? AND data_subject = ?", tenant, buyers.a)
    expect(dead.length).toBeGreaterThan(0)
    for (const d of dead) expect(d).toEqual({ last_error: "[erased]", stack: null })
    expect(await rows("SELECT 1 FROM runs WHERE error LIKE ?", `%${phones.a}%`)).toEqual([])
    expect(await rows("SELECT 1 FROM dead_messages WHERE last_error LIKE ?", `%${phones.a}%`)).toEqual([])

    // The export files holding A are gone from R2, their jobs kept with the output removed (a 409 naming the erasure); B's only file is kept.
    for (const id of exports.held) {
      expect(await outputParts(id)).toBe(0)
      const job = (await api("GET", `/v1/batches/${id}`)).body
      expect(job).toMatchObject({ status: "succeeded", output: null, error: expect.stringContaining(done.erasure_id) })
      const gone = await request(`/v1/batches/${id}/output`, { token: tokenA })
      expect(gone.status).toBe(409)
      expect(await gone.text()).toContain(`removed by the erasure ${done.erasure_id}`)
    }
    expect(await outputParts(exports.kept)).toBeGreaterThan(0)
    expect((await outputText(exports.kept)).text).toContain(`"buyer_id":"${buyers.b}"`)

    // The audit fact: one, no personal data in it.
    const audit = await eventually(async () => ((await auditFacts()).length > 0 ? auditFacts() : undefined), 20_000, "the subject_erased fact in the facts copy")
    expect(audit).toHaveLength(1)
    expect(audit[0]!.body).not.toContain(phones.a)
    expect(JSON.parse(audit[0]!.body)).toMatchObject({ erasure_id: done.erasure_id, subject: buyers.a, generations: done.generations_erased, removed: done.removed })

    // Buyer B untouched: plaintext through the readers, its rows and texts as they were.
    expect(await outcomePhone("b")).toBe(phones.b)
    expect((await callRows("b")).map((r) => r.caller_phone_masked)).toEqual([expect.stringMatching(/^•••• \d{4}$/), expect.stringMatching(/^•••• \d{4}$/)])
    expect((await rows("SELECT 1 FROM dead_messages WHERE tenant_id = ? AND data_subject = ? AND last_error LIKE ?", tenant, buyers.b, `%${phones.b}%`)).length).toBeGreaterThan(0)
    expect((await erasureOf("b")).status).toBe(404)
  }, 150_000)

  it("a second call answers the same erasure and redoes nothing", async () => {
    const first = (await erasureOf("a")).body
    const again = await api("POST", `/v1/subjects/${buyers.a}/erase`)
    expect(again.status).toBe(202)
    expect(again.body).toEqual(first)
    await drain({ timeoutMs: 30_000 })
    expect((await erasureOf("a")).body).toEqual(first)
    expect(await auditFacts()).toHaveLength(1)
    expect(await rows("SELECT id FROM subject_erasures WHERE tenant_id = ? AND subject = ?", tenant, buyers.a)).toHaveLength(1)
  })

  it("after new data of the subject (a new key generation), a POST starts a new erasure that erases it; a third POST answers that one", async () => {
    const first = (await erasureOf("a")).body
    const newPhone = `+44 7700 8${digits(5)}`
    const newCall = callCompleted({ schema_version: 3 }, { buyer_id: buyers.a, duration_s: 45, price_cents: 300, caller_phone: newPhone })
    const posted = await postEvents({ events: [newCall] })
    expect(posted.status, JSON.stringify(await posted.clone().json())).toBe(202)
    await drain({ timeoutMs: 60_000 })
    const newCallPhone = async () => {
      const got = await api("GET", `/v1/streams/${newCall.subject}/facts`)
      expect(got.status, JSON.stringify(got.body)).toBe(200)
      return (got.body.facts as Array<{ type: string; data: Record<string, unknown> }>).find((f) => f.type === "outcome")?.data.caller_phone
    }
    expect(await newCallPhone(), "the new data is readable: a new key generation").toBe(newPhone)

    const started = await api("POST", `/v1/subjects/${buyers.a}/erase`)
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    expect(started.body.erasure_id).not.toBe(first.erasure_id)
    expect(started.body.phase).toBe("keys")
    const second = await eventually(async () => {
      await drain({ timeoutMs: 30_000 })
      const got = await erasureOf("a")
      return got.body.phase === "erased" || got.body.phase === "failed" ? got.body : undefined
    }, 90_000, "the second erasure to end")
    expect(second).toMatchObject({ erasure_id: started.body.erasure_id, phase: "erased", error: null })
    expect(second.generations_erased.length, "only the new generation").toBe(1)
    expect(second.generations_erased.some((g: number) => first.generations_erased.includes(g))).toBe(false)
    expect(second.removed["projection:calls"]).toEqual({ masked: 1 })

    expect(await newCallPhone()).toBe("[erased]")
    expect(await rows("SELECT 1 FROM calls WHERE tenant_id = ? AND buyer_id = ? AND caller_phone_masked <> '[erased]'", tenant, buyers.a)).toEqual([])
    const audit = await eventually(async () => ((await auditFacts()).length === 2 ? auditFacts() : undefined), 20_000, "the second subject_erased fact")
    expect(audit.map((f) => JSON.parse(f.body).erasure_id).sort()).toEqual([first.erasure_id, second.erasure_id].sort())
    for (const f of audit) expect(f.body).not.toContain(newPhone)

    // No new data since: a third POST answers the second erasure and starts nothing.
    const third = await api("POST", `/v1/subjects/${buyers.a}/erase`)
    expect(third.status).toBe(202)
    expect(third.body).toEqual(second)
    await drain({ timeoutMs: 30_000 })
    expect(await rows("SELECT id FROM subject_erasures WHERE tenant_id = ? AND subject = ?", tenant, buyers.a)).toHaveLength(2)
    expect(await auditFacts()).toHaveLength(2)
    // Buyer B untouched by either.
    expect(await outcomePhone("b")).toBe(phones.b)
  }, 200_000)

  it("the export answers each buyer's data: A's personal fields as the marker, B's in plaintext", async () => {
    const a = await api("GET", `/v1/subjects/${buyers.a}/export`)
    expect(a.status).toBe(200)
    expect(a.body.facts.length).toBeGreaterThan(0)
    expect(JSON.stringify(a.body)).not.toContain(phones.a)
    expect(a.body.facts.filter((f: any) => "caller_phone" in f.data).every((f: any) => f.data.caller_phone === "[erased]")).toBe(true)
    const b = await api("GET", `/v1/subjects/${buyers.b}/export`)
    expect(b.body.facts.filter((f: any) => f.data.caller_phone === phones.b).length).toBeGreaterThanOrEqual(2)
    expect(b.body.projections.find((p: any) => p.projection === "calls")?.rows).toHaveLength(2)
    expect(b.body.truncated).toBe(false)
  })

  it("an erasure recorded whose first step was never sent (the INSERT's reply lost) runs once the caller asks again", async () => {
    // As if D1 kept the row but lost its reply: recorded at `keys`, no step on the queue.
    const subject = unique("buyer-lost")
    const id = `er_lost_${unique("x")}`
    const now = new Date().toISOString()
    await env.DB.prepare("INSERT INTO subject_erasures (id, tenant_id, subject, phase, progress, requested_by, started_at, updated_at) VALUES (?, ?, ?, 'keys', '{\"removed\":{}}', 'probe', ?, ?)")
      .bind(id, tenant, subject, now, now).run()
    await drain({ timeoutMs: 10_000 })
    expect((await api("GET", `/v1/subjects/${subject}/erasure`)).body.phase).toBe("keys")
    const again = await api("POST", `/v1/subjects/${subject}/erase`)
    expect(again.status, JSON.stringify(again.body)).toBe(202)
    expect(again.body.erasure_id).toBe(id)
    const done = await eventually(async () => {
      await drain({ timeoutMs: 30_000 })
      const got = await api("GET", `/v1/subjects/${subject}/erasure`)
      return got.body.phase === "erased" || got.body.phase === "failed" ? got.body : undefined
    }, 90_000, "the resent erasure to end")
    expect(done.phase).toBe("erased")
  })

  it("a subject id over 256 characters is a 400 problem", async () => {
    const got = await api("POST", `/v1/subjects/${"x".repeat(257)}/erase`)
    expect(got.status).toBe(400)
  })
})
