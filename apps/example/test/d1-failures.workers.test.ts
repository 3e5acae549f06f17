/**
 * D1's errors by reason, on the real local D1 (platform/Sql.ts, `classify`): a constraint violation is a 409
 * `constraint_violation`, not retried; a statement D1 cannot run is a `Bug` — a 500 `internal error` saying
 * nothing of the SQL, dead-lettered at once by a consumer with reason `defect`; a transient error ("D1_ERROR:
 * Network connection lost.", Cloudflare's documented "retry the operation") is retried. The constraint is a
 * real unique index laid on the table for the test; the bad statement is the store's own with a typo D1 itself
 * refuses; only the transient error is thrown by a wrapper, as D1 would throw it.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { afterEach, describe, expect, it } from "vitest"
import { FactMessage } from "@factline/core/runtime"
import * as CountingBindings from "@factline/core/testing/bindings"
import type { Fact } from "@factline/schemas"
import type { PlatformEnv } from "@factline/workers"
import { request, storedFact, tokenA, unique } from "./helpers.js"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv
/** Every D1 database of the Worker: the platform's and the read databases a tenant may be placed on. */
const databases = Object.keys(testEnv).filter((name) => name === "DB" || /^FACTLINE_READ_DB_\d+$/.test(name))

const passThrough = (target: object, prop: PropertyKey) => {
  const value = (target as any)[prop]
  return typeof value === "function" ? value.bind(target) : value
}

/** A D1 database that runs every statement as written, except those `rewrite` changes: D1 gets the changed SQL. */
const rewriting = (db: D1Database, rewrite: (sql: string) => string): D1Database =>
  new Proxy(db, {
    get(target, prop) {
      if (prop === CountingBindings.unwrap) return (target as any)[CountingBindings.unwrap] ?? target
      if (prop === "prepare") return (sql: string) => target.prepare(rewrite(sql))
      return passThrough(target, prop)
    }
  })

/** A D1 database whose every call throws D1's own transient error, as a dropped connection does; counts the calls. */
const connectionLost = (db: D1Database, calls: { n: number }): D1Database => {
  const lost = () => {
    calls.n++
    return Promise.reject(new Error("D1_ERROR: Network connection lost."))
  }
  const statement = (s: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(s, { get: (t, p) => (p === "bind" ? (...args: Array<unknown>) => statement(t.bind(...args)) : p === "run" || p === "all" || p === "first" || p === "raw" ? lost : passThrough(t, p)) })
  return new Proxy(db, {
    get(target, prop) {
      if (prop === CountingBindings.unwrap) return (target as any)[CountingBindings.unwrap] ?? target
      if (prop === "prepare") return (sql: string) => statement(target.prepare(sql))
      if (prop === "batch" || prop === "exec") return lost
      return passThrough(target, prop)
    }
  })
}

/** The Worker's env with every D1 database wrapped by `wrap`. */
const withDatabases = (wrap: (db: D1Database) => D1Database): PlatformEnv =>
  ({ ...testEnv, ...Object.fromEntries(databases.map((name) => [name, wrap((testEnv as any)[name] as D1Database)])) }) as PlatformEnv

const call = async (runEnv: PlatformEnv, method: string, path: string, body?: unknown) => {
  const response = await platform.fetch(new Request(`http://factline.test${path}`, {
    method,
    headers: { authorization: `Bearer ${tokenA}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  }), runEnv, createExecutionContext())
  return { status: response.status, retryAfter: response.headers.get("retry-after"), text: await response.text() }
}

/** One delivery of these facts to the projections consumer; which messages were retried, acked and dead-lettered. */
const project = async (facts: ReadonlyArray<Fact>, runEnv: PlatformEnv) => {
  const deadLettered: Array<any> = []
  const dlq = (testEnv as any).PROJECTIONS_DLQ as Queue
  const recordingDlq = {
    send: (b: unknown, o?: QueueSendOptions) => (deadLettered.push(b), dlq.send(b, o)),
    sendBatch: (m: Iterable<MessageSendRequest>, o?: QueueSendBatchOptions) => {
      const list = [...m]
      deadLettered.push(...list.map((x) => x.body))
      return dlq.sendBatch(list, o)
    }
  }
  const id = unique("qm")
  const batch = createMessageBatch("factline-projections", [{ id, timestamp: new Date(), attempts: 1, body: FactMessage.make(facts) }])
  const ctx = createExecutionContext()
  await platform.queue(batch, { ...runEnv, PROJECTIONS_DLQ: recordingDlq } as PlatformEnv, ctx)
  const result = await getQueueResult(batch, ctx)
  return { retried: result.retryMessages.map((r) => r.msgId).includes(id), acked: result.explicitAcks.includes(id), deadLettered }
}

const callRow = (callId: string) =>
  env.DB.prepare("SELECT charged_cents FROM calls WHERE tenant_id = 'tenant-a' AND call_id = ?").bind(callId).first()

const created: Array<string> = []
const uniqueUrlIndex = "test_webhook_endpoints_one_url"
afterEach(async () => {
  for (const name of databases) await (testEnv as any)[name].prepare(`DROP INDEX IF EXISTS ${uniqueUrlIndex}`).run()
  for (const id of created.splice(0)) await request(`/v1/webhooks/endpoints/${id}`, { method: "DELETE", token: tokenA })
})

describe("D1 errors by reason", () => {
  it("a real constraint violation through the webhook store is a 409 constraint_violation, without retry-after, and nothing is written", async () => {
    // A unique index the schema does not have: the second endpoint with the same URL violates it in D1 itself.
    for (const name of databases) await (testEnv as any)[name].prepare(`CREATE UNIQUE INDEX ${uniqueUrlIndex} ON webhook_endpoints (tenant_id, url)`).run()
    const url = `${env.TEST_RECEIVER_URL}/${unique("hook")}`
    const endpoint = { url, event_types: ["charge.created"] }
    const first = await call(testEnv, "POST", "/v1/webhooks/endpoints", endpoint)
    expect(first.status).toBe(201)
    created.push(JSON.parse(first.text).id)
    const second = await call(testEnv, "POST", "/v1/webhooks/endpoints", endpoint)
    expect(second.status).toBe(409)
    expect(second.retryAfter).toBeNull()
    const problem = JSON.parse(second.text)
    expect(problem.error.code).toBe("constraint_violation")
    expect(problem.error.message).toMatch(/UNIQUE constraint failed: webhook_endpoints\.tenant_id, webhook_endpoints\.url/)
    expect(second.text).not.toMatch(/INSERT|SELECT/)
    const listed = JSON.parse((await call(testEnv, "GET", "/v1/webhooks/endpoints?limit=100")).text)
    expect(listed.data.filter((e: { url: string }) => e.url === url)).toHaveLength(1)
  })

  it("a statement D1 cannot run is a 500 that says only internal error: no SQL, no table, no driver text, no retry-after", async () => {
    // The store's own listing with a typo in its SQL, run by the real D1 (which refuses it with a syntax error).
    const broken = withDatabases((db) => rewriting(db, (sql) => (/FROM webhook_endpoints WHERE tenant_id = \? /.test(sql) ? sql.replace("SELECT *", "SELEC *") : sql)))
    const answer = await call(broken, "GET", "/v1/webhooks/endpoints")
    expect(answer.status).toBe(500)
    expect(answer.retryAfter).toBeNull()
    expect(JSON.parse(answer.text)).toEqual({ error: { code: "internal", message: "internal error" } })
    expect(answer.text).not.toMatch(/SELEC|webhook_endpoints|syntax|D1_|SQLITE/i)
    // The same request on the real statement answers.
    expect((await call(testEnv, "GET", "/v1/webhooks/endpoints")).status).toBe(200)
  })

  it("a projection write D1 cannot run is dead-lettered at once with reason defect; the same fact is applied once the statement is right", async () => {
    const call_id = unique("call")
    const buyer_id = unique("buyer")
    const fact = await storedFact(call_id, 3, "charge", { call_id, buyer_id, amount_cents: 700, currency: "EUR" })
    // The calls projection's upsert with a typo D1 refuses ("near …: syntax error"); not a missing table, which is
    // told apart as a projection never migrated.
    const broken = withDatabases((db) => rewriting(db, (sql) => sql.replace(/^INSERT INTO ("?calls"?) \(/, "INSERT INTO $1 ((")))
    const refused = await project([fact], broken)
    expect(refused).toMatchObject({ retried: false, acked: true })
    expect(refused.deadLettered).toHaveLength(1)
    expect(refused.deadLettered[0].failure).toMatchObject({ reason: "defect", attempts: 1 })
    expect(refused.deadLettered[0].failure.last_error).toMatch(/projection "calls": .*syntax error/)
    expect(await callRow(call_id)).toBeNull()
    const applied = await project([fact], testEnv)
    expect(applied).toMatchObject({ retried: false, acked: true, deadLettered: [] })
    expect(await callRow(call_id)).toEqual({ charged_cents: 700 })
  })

  it("D1_ERROR: Network connection lost is retried, not dead-lettered; redelivered with D1 back, the fact is applied once", async () => {
    const call_id = unique("call")
    const buyer_id = unique("buyer")
    const fact = await storedFact(call_id, 3, "charge", { call_id, buyer_id, amount_cents: 400, currency: "EUR" })
    const calls = { n: 0 }
    const lost = await project([fact], withDatabases((db) => connectionLost(db, calls)))
    expect(calls.n).toBeGreaterThan(0)
    expect(lost).toMatchObject({ retried: true, acked: false, deadLettered: [] })
    expect(await callRow(call_id)).toBeNull()
    const applied = await project([fact], testEnv)
    expect(applied).toMatchObject({ retried: false, acked: true, deadLettered: [] })
    expect(await callRow(call_id)).toEqual({ charged_cents: 400 })
  })
})
