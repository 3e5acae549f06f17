/**
 * `@factline/client` end to end against the real Worker: the client's `fetch` is the Worker's own (no
 * network), everything behind it is the platform as it runs — ingest, queues, handler, processor, ledger,
 * projections, the query API. The client's retries and batching under faults are tested in Node against a
 * fault-injection server (packages/client/test); here its emits, refusals and typed reads meet the real API.
 */
import { exports } from "cloudflare:workers"
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { Client, Forbidden, IdempotencyConflict, InvalidEvents, InvalidQuery, NotFound, Unauthorized } from "@factline/client"
import { MessageDefinition } from "@factline/core/definitions"
import { buyerBudgetsProjection, CallCompleted, CallCompletedV2, CallCompletedV3, Charge, callsProjection, Outcome, Qualification } from "../src/calls/Calls.js"
import { drain } from "./Drain.js"
import { tokenA, tokenAReadOnly, unique } from "./helpers.js"

/** A client whose `fetch` is the Worker's, and the idempotency keys of each `POST /v1/events` it made. */
const clientFor = (token: string) => {
  const posts: Array<Array<string>> = []
  const client = Client.make({
    baseUrl: "http://factline.test",
    token,
    source: "client-test",
    fetch: (url, init) => {
      if (init.method === "POST") posts.push((JSON.parse(String(init.body)).events as Array<{ idempotency_key: string }>).map((e) => e.idempotency_key))
      return exports.default.fetch(new Request(url, init))
    }
  })
  return Object.assign(client, { posts })
}

const settle = <A>(promise: Promise<A>) => promise.then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }))

describe("@factline/client against the Worker", () => {
  it("emits call.completed, and reads the stream and the projections it produced, typed", async () => {
    const client = clientFor(tokenA)
    const buyer = unique("buyer")
    const long = unique("call")
    const short = unique("call")
    const call = (call_id: string, duration_s: number, price_cents: number) =>
      client.emit(CallCompleted, { call_id, buyer_id: buyer, duration_s, price_cents, currency: "EUR" }, { subject: call_id, idempotency_key: `call.completed:${call_id}` })

    // Two emits made together: one request, each its own item.
    const emitted = await Promise.all([call(long, 90, 300), call(short, 30, 200)])
    expect(emitted).toEqual([
      { idempotency_key: `call.completed:${long}`, duplicate: false },
      { idempotency_key: `call.completed:${short}`, duplicate: false }
    ])
    expect(client.posts).toEqual([[`call.completed:${long}`, `call.completed:${short}`]])
    // The same event again (a producer's retry): accepted once.
    expect(await call(long, 90, 300)).toEqual({ idempotency_key: `call.completed:${long}`, duplicate: true })
    await drain()

    // The handler's outcome, the processor's qualification and charge, typed by their definitions.
    const stream = await client.readStream(long, { types: [Outcome, Qualification, Charge] })
    expect(stream.facts.map((f) => f.type)).toEqual(["outcome", "qualification", "charge"])
    const charge = stream.facts.find((f) => f.type === "charge")
    expect(charge?.type === "charge" ? charge.data : undefined).toEqual({ call_id: long, buyer_id: buyer, amount_cents: 300, currency: "EUR" })
    expect(stream.facts[0]).toMatchObject({ stream: long, sequence: 1, causation_id: `call.completed:${long}`, caused_by: "record-outcome" })
    // Page by page (`after`), one fact per page.
    const sequences: Array<number> = []
    for await (const fact of client.streamFacts(long, { limit: 1 })) sequences.push(fact.sequence)
    expect(sequences).toEqual([1, 2, 3])

    // The projections, typed by their tables, filtered by a queryable column.
    const calls = await client.readProjection(callsProjection, { where: { buyer_id: buyer } })
    expect(calls.data.map(({ call_id, qualified, charged_cents, duration_s }) => ({ call_id, qualified, charged_cents, duration_s })).sort((a, b) => (a.call_id < b.call_id ? -1 : 1))).toEqual(
      [
        { call_id: long, qualified: true, charged_cents: 300, duration_s: 90 },
        { call_id: short, qualified: false, charged_cents: 0, duration_s: 30 }
      ].sort((a, b) => (a.call_id < b.call_id ? -1 : 1))
    )
    const budgets = await client.readProjection(buyerBudgetsProjection, { where: { buyer_id: buyer } })
    expect(budgets.data).toEqual([{ buyer_id: buyer, spent_cents: 300, charges: 1, refunds: 0 }])
    // Cursor paging: one row per page, both rows.
    const rows: Array<string> = []
    for await (const row of client.projectionRows(callsProjection, { where: { buyer_id: buyer }, limit: 1 })) rows.push(row.call_id)
    expect(rows.sort()).toEqual([long, short].sort())

    // The tenant's facts of one type, typed.
    const charges = await client.readFacts({ type: Charge, subject: long })
    expect(charges.data.map((f) => [f.subject, f.data.amount_cents])).toEqual([[long, 300]])
  })

  it("the API's refusals come back typed, each to the emit it names; the rest of the batch is accepted", async () => {
    const client = clientFor(tokenA)
    // A service ahead of the platform: a v4 the platform does not know yet.
    const CallCompletedAhead = MessageDefinition.event("call.completed")
      .version(1, Schema.Struct({ call_id: Schema.String, buyer_id: Schema.String, duration_s: Schema.Int, price_cents: Schema.Int }))
      .version(2, CallCompletedV2, (v1) => ({ ...v1, currency: "USD" }))
      .version(3, CallCompletedV3, (v2) => v2)
      .version(4, Schema.Struct({ ...CallCompletedV3.fields, region: Schema.String }), (v3) => ({ ...v3, region: "eu" }))
    const good = unique("call")
    const ahead = unique("call")
    const [accepted, refused] = await Promise.all([
      settle(client.emit(CallCompleted, { call_id: good, buyer_id: "b", duration_s: 10, price_cents: 1, currency: "USD" }, { subject: good, idempotency_key: `call.completed:${good}` })),
      settle(client.emit(CallCompletedAhead, { call_id: ahead, buyer_id: "b", duration_s: 10, price_cents: 1, currency: "USD", region: "eu" }, { subject: ahead, idempotency_key: `call.completed:${ahead}` }))
    ])
    expect(accepted).toEqual({ ok: true, value: { idempotency_key: `call.completed:${good}`, duplicate: false } })
    expect(refused.ok).toBe(false)
    const invalid = (refused as { error: unknown }).error
    expect(invalid).toBeInstanceOf(InvalidEvents)
    expect(invalid).toMatchObject({ code: "invalid_events", idempotency_key: `call.completed:${ahead}`, problems: [{ path: "schema_version" }] })
    // Refused by the platform (the client's own check passed): sent together, then the good one again alone.
    expect(client.posts).toEqual([[`call.completed:${good}`, `call.completed:${ahead}`], [`call.completed:${good}`]])

    // Another payload under an accepted key.
    const conflict = await settle(client.emit(CallCompleted, { call_id: good, buyer_id: "b", duration_s: 11, price_cents: 1, currency: "USD" }, { subject: good, idempotency_key: `call.completed:${good}` }))
    expect((conflict as { error: unknown }).error).toBeInstanceOf(IdempotencyConflict)
    expect((conflict as { error: unknown }).error).toMatchObject({ idempotency_key: `call.completed:${good}`, reason: "accepted_before" })

    // Tokens: a read-only one cannot emit, an unknown one cannot do anything.
    const readOnly = await settle(clientFor(tokenAReadOnly).emit(CallCompleted, { call_id: good, buyer_id: "b", duration_s: 10, price_cents: 1, currency: "USD" }, { subject: good, idempotency_key: unique("k") }))
    expect((readOnly as { error: unknown }).error).toBeInstanceOf(Forbidden)
    expect((await settle(clientFor("not-a-token").readStream(good))).ok).toBe(false)
    expect(((await settle(clientFor("not-a-token").readStream(good))) as { error: unknown }).error).toBeInstanceOf(Unauthorized)

    // Reads: an unknown stream, a filter on a column that is not queryable.
    expect(((await settle(client.readStream(unique("nothing")))) as { error: unknown }).error).toBeInstanceOf(NotFound)
    const notQueryable = await settle(client.readProjection("calls", { where: { duration_s: 90 } }))
    expect((notQueryable as { error: unknown }).error).toBeInstanceOf(InvalidQuery)
    expect((notQueryable as { error: unknown }).error).toMatchObject({ problems: [{ path: "duration_s" }] })
    await drain()
  })
})
