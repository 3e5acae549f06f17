/**
 * Issue 8, defect 1, the queue path: a producer holding the events queue
 * binding sends one idempotency key with another payload (or subject). The
 * second message must be dead-lettered as `idempotency_conflict` with both
 * payload hashes in its failure context — never silently dropped as a
 * duplicate, never appended as a second decision — whether the two arrive in
 * separate batches, in one batch, or the key was first accepted over HTTP.
 * Everything goes through the real local events queue and its DLQ.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { AcceptedKeys, KeyReceipts } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { callCompleted, deadMessages, eventually, postEvents, readStream, shardKeyOf, tokenA, unique } from "./helpers.js"
import { platform } from "./worker.js"

const send = (body: unknown) => env.EVENTS_QUEUE.send(body, { contentType: "json" })

const hashOf = (e: { message_type: string; schema_version: number; subject: string; payload: unknown }) => AcceptedKeys.payloadHash(e)

/** The dead letters of a key once `count` arrived (the DLQ consumer stores them from the real DLQ queue). */
const deadLetters = (key: string, count = 1) =>
  eventually(async () => {
    const rows = await deadMessages(key)
    return rows.length >= count ? rows : undefined
  }, 30_000, `the dead letter of ${key}`)

const outcomes = async (subject: string) => (await readStream("tenant-a", subject)).facts.filter((f) => f.type === "outcome")

const expectConflictRecord = (row: Record<string, any>, accepted: string, refused: string, message_id: string) => {
  expect(row).toMatchObject({ reason: "idempotency_conflict", queue: "factline-events", attempts: 1 })
  // Both hashes, named, in the failure context: which payload the key is bound to and which one was refused.
  expect(row.last_error).toContain(`accepted payload_hash ${accepted}`)
  expect(row.last_error).toContain(`this message's payload_hash ${refused}`)
  expect(JSON.parse(row.original_message).message_id).toBe(message_id)
}

describe("queue path: one idempotency key, one payload", () => {
  it("the same key with another payload, in a later batch, is dead-lettered with both hashes; the first decision stands", async () => {
    const first = callCompleted({}, { price_cents: 100 })
    await send(first)
    await eventually(async () => ((await outcomes(first.subject)).length === 1 ? true : undefined), 30_000, "the first event")
    const second = { ...callCompleted({}, { call_id: first.subject, price_cents: 999 }), idempotency_key: first.idempotency_key }
    await send(second)
    const [row] = await deadLetters(first.idempotency_key)
    expectConflictRecord(row!, await hashOf(first), await hashOf(second), second.message_id)
    const facts = await outcomes(first.subject)
    expect(facts.map((f) => f.data.price_cents)).toEqual([100])
  })

  it("the same key on another subject (another shard) is dead-lettered, not appended as a second decision", async () => {
    const first = callCompleted()
    await send(first)
    await eventually(async () => ((await outcomes(first.subject)).length === 1 ? true : undefined), 30_000, "the first event")
    // A subject on another shard: the ledger's fact ids (unique per shard) cannot see the reuse there.
    let other = unique("call")
    while ((await shardKeyOf("tenant-a", other)) === (await shardKeyOf("tenant-a", first.subject))) other = unique("call")
    const second = { ...callCompleted({}, { call_id: other }), idempotency_key: first.idempotency_key }
    await send(second)
    const [row] = await deadLetters(first.idempotency_key)
    expectConflictRecord(row!, await hashOf(first), await hashOf(second), second.message_id)
    expect((await readStream("tenant-a", other)).version).toBe(0)
  })

  it("a decider's command repeated under its key with another payload is dead-lettered, not taken for a redelivery", async () => {
    const call = unique("call")
    const key = unique("dispute")
    const dispute = (reason: string) => ({
      schema_version: 1, message_type: "call.dispute", message_id: unique("msg"), idempotency_key: key, correlation_id: key,
      tenant_id: "tenant-a", subject: call, source: "test", created_at: new Date().toISOString(), payload: { call_id: call, reason }
    })
    const first = dispute("bad line")
    await send(first)
    await eventually(async () => ((await readStream("tenant-a", call)).version === 1 ? true : undefined), 30_000, "the first dispute")
    const second = dispute("another reason")
    await send(second)
    const [row] = await deadLetters(key)
    expectConflictRecord(row!, await hashOf(first), await hashOf(second), second.message_id)
    expect((await readStream("tenant-a", call)).facts.map((f) => [f.type, f.data.why])).toEqual([["dispute_rejected", "not_charged"]])
  })

  it("two payloads under one key in one sendBatch: one is decided, the other dead-lettered naming both hashes", async () => {
    const a = callCompleted({}, { price_cents: 111 })
    const b = { ...callCompleted({}, { call_id: a.subject, price_cents: 222 }), idempotency_key: a.idempotency_key }
    await env.EVENTS_QUEUE.sendBatch([a, b].map((body) => ({ body, contentType: "json" as const })))
    const [row] = await deadLetters(a.idempotency_key)
    const refused = JSON.parse(row!.original_message).message_id === a.message_id ? a : b
    const kept = refused === a ? b : a
    expectConflictRecord(row!, await hashOf(kept), await hashOf(refused), refused.message_id)
    const facts = await eventually(async () => {
      const list = await outcomes(a.subject)
      return list.length > 0 ? list : undefined
    }, 30_000, "the kept event")
    expect(facts.map((f) => f.data.price_cents)).toEqual([kept.payload.price_cents])
    expect(await deadMessages(a.idempotency_key)).toHaveLength(1)
  })

  it("a key accepted over HTTP binds the queue path too", async () => {
    const first = callCompleted({}, { price_cents: 300 })
    expect((await postEvents(first)).status).toBe(202)
    const second = { ...callCompleted({}, { call_id: first.subject, price_cents: 301 }), idempotency_key: first.idempotency_key }
    await send(second)
    const [row] = await deadLetters(first.idempotency_key)
    expectConflictRecord(row!, await hashOf(first), await hashOf(second), second.message_id)
    await eventually(async () => ((await outcomes(first.subject)).length === 1 ? true : undefined), 30_000, "the HTTP event")
    expect((await outcomes(first.subject)).map((f) => f.data.price_cents)).toEqual([300])
  })

  it("the same payload again (new message_id, created_at, correlation_id, source) is a replay: acked, nothing dead-lettered", async () => {
    const first = callCompleted()
    const dlqSends: Array<unknown> = []
    const recordingDlq = {
      send: (body: unknown, options?: QueueSendOptions) => (dlqSends.push(body), env.EVENTS_DLQ.send(body, options)),
      sendBatch: (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
        const list = [...messages]
        dlqSends.push(...list.map((m) => m.body))
        return env.EVENTS_DLQ.sendBatch(list, options)
      }
    } as Queue
    const deliver = async (body: unknown) => {
      const batch = createMessageBatch("factline-events", [{ id: unique("qm"), timestamp: new Date(), attempts: 1, body }])
      const ctx = createExecutionContext()
      await platform.queue(batch, { ...(env as unknown as PlatformEnv), EVENTS_DLQ: recordingDlq }, ctx)
      return getQueueResult(batch, ctx)
    }
    expect((await deliver(first)).explicitAcks).toHaveLength(1)
    const replay = { ...first, message_id: unique("msg"), created_at: new Date(Date.now() + 1_000).toISOString(), correlation_id: unique("corr"), source: "elsewhere" }
    expect((await deliver(replay)).explicitAcks).toHaveLength(1)
    expect(dlqSends).toEqual([])
    expect(await outcomes(first.subject)).toHaveLength(1)
    // The control: another payload under the key, delivered the same way, is sent to the DLQ.
    await deliver({ ...first, message_id: unique("msg"), payload: { ...first.payload, duration_s: 1 } })
    expect(dlqSends).toHaveLength(1)
    expect(dlqSends[0]).toMatchObject({ failure: { reason: "idempotency_conflict" } })
  })

  it("binding a batch's keys searches the primary key per key, never scans the tenants' keys", async () => {
    const rows = JSON.stringify(Array.from({ length: 50 }, (_, i) => ["tenant-a", unique(`k${i}`), "h", "t", "s"]))
    const plan = async (sql: string, params: Array<unknown>) =>
      (await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>()).results.map((r) => r.detail)
    const details = [...(await plan(AcceptedKeys.claimUnseen, [rows, new Date().toISOString()])), ...(await plan(AcceptedKeys.selectBound, [rows]))]
    // The request's rows (json_each) are the outer loop; the table is only ever searched by its primary key.
    expect(details.filter((d) => /^SEARCH/.test(d))).toEqual(["SEARCH k USING PRIMARY KEY (tenant_id=? AND idempotency_key=?)"])
    for (const detail of details) expect(detail).toMatch(/^SCAN j VIRTUAL TABLE|^SEARCH k USING PRIMARY KEY \(tenant_id=\? AND idempotency_key=\?\)$/)
  })
})

describe("key receipts: a message the HTTP edge accepted is not claimed again (issue 41)", () => {
  const secretsKey = (env as unknown as { FACTLINE_SECRETS_KEY: string }).FACTLINE_SECRETS_KEY
  const receipts = KeyReceipts.make(secretsKey)
  const storedKey = (key: string) =>
    env.DB.prepare("SELECT payload_hash FROM accepted_keys WHERE tenant_id = ? AND idempotency_key = ?").bind("tenant-a", key).first<{ payload_hash: string }>()
  const deliver = async (body: unknown) => {
    const batch = createMessageBatch("factline-events", [{ id: unique("qm"), timestamp: new Date(), attempts: 1, body }])
    const ctx = createExecutionContext()
    await platform.queue(batch, env as unknown as PlatformEnv, ctx)
    return getQueueResult(batch, ctx)
  }
  const receiptOf = async (e: ReturnType<typeof callCompleted>) =>
    (await receipts.sign({ tenant_id: e.tenant_id, idempotency_key: e.idempotency_key, payload_hash: await hashOf(e) }))!

  it("the edge stamps each envelope it sends with the receipt of its key's binding", async () => {
    const sent: Array<any> = []
    const queue = {
      send: (body: unknown, options?: QueueSendOptions) => (sent.push(body), env.EVENTS_QUEUE.send(body, options)),
      sendBatch: (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
        const list = [...messages]
        sent.push(...list.map((m) => m.body))
        return env.EVENTS_QUEUE.sendBatch(list, options)
      }
    } as Queue
    const event = callCompleted()
    const response = await platform.fetch(
      new Request("http://factline.test/v1/events", {
        method: "POST", body: JSON.stringify(event), headers: { authorization: `Bearer ${tokenA}`, "content-type": "application/json" }
      }),
      { ...env, EVENTS_QUEUE: queue } as never,
      { waitUntil: () => undefined, passThroughOnException: () => undefined } as never
    )
    expect(response.status).toBe(202)
    expect(sent).toHaveLength(1)
    expect(sent[0].key_receipt).toBe(await receiptOf(event))
    // A client cannot hand one in: only the edge makes receipts.
    const forged = await postEvents({ ...callCompleted(), key_receipt: sent[0].key_receipt })
    expect(forged.status).toBe(400)
    expect(JSON.stringify(await forged.json())).toContain("key_receipt")
  })

  it("a receipted message is decided without a claim; an unreceipted or forged one is claimed", async () => {
    const receipted = callCompleted()
    expect((await deliver({ ...receipted, key_receipt: await receiptOf(receipted) })).explicitAcks).toHaveLength(1)
    expect(await outcomes(receipted.subject)).toHaveLength(1)
    // No claim: the consumer did not bind the key (the edge would have; this one was signed by the test).
    expect(await storedKey(receipted.idempotency_key)).toBeNull()

    const plain = callCompleted()
    expect((await deliver(plain)).explicitAcks).toHaveLength(1)
    expect(await storedKey(plain.idempotency_key)).toEqual({ payload_hash: await hashOf(plain) })

    const forged = callCompleted()
    expect((await deliver({ ...forged, key_receipt: "kr1.AAAAAAAAAAAAAAAAAAAAAA" })).explicitAcks).toHaveLength(1)
    expect(await storedKey(forged.idempotency_key)).toEqual({ payload_hash: await hashOf(forged) })
    expect(await outcomes(forged.subject)).toHaveLength(1)
  })

  it("a receipt does not cover another payload: the key's reuse is still dead-lettered with both hashes", async () => {
    const first = callCompleted({}, { price_cents: 400 })
    expect((await postEvents(first)).status).toBe(202)
    const second = { ...callCompleted({}, { call_id: first.subject, price_cents: 401 }), idempotency_key: first.idempotency_key }
    // The first's receipt copied onto another payload: it does not verify, so the message is claimed and refused.
    await send({ ...second, key_receipt: await receiptOf(first) })
    const [row] = await deadLetters(first.idempotency_key)
    expectConflictRecord(row!, await hashOf(first), await hashOf(second), second.message_id)
    await eventually(async () => ((await outcomes(first.subject)).length === 1 ? true : undefined), 30_000, "the HTTP event")
    expect((await outcomes(first.subject)).map((f) => f.data.price_cents)).toEqual([400])
  })
})
