/**
 * Issue 8, defect 12: money above 2^53. An amount is refused at ingest when it
 * is not a safe integer; sums past 2^53 − 1 are kept exact by D1 (64-bit
 * integers) and must reach the API exact too (as a decimal string); an
 * additive increment that is not a safe integer is a permanent, named failure
 * instead of a silently rounded sum.
 */
import { env } from "cloudflare:workers"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { Registry } from "@factline/core"
import { FactsCopy, KeyRing, Placement, ProjectionConsumer, ProjectionStore } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import { callCompleted, eventually, postEvents, request, storedFact, tokenA, unique } from "./helpers.js"
import { platform } from "./worker.js"

const maxSafe = Number.MAX_SAFE_INTEGER // 9007199254740991

/** The stored row as D1 holds it: integers read as text, so nothing is rounded on the way to the test. */
const storedBudget = (buyer: string) =>
  env.DB.prepare(
    "SELECT CAST(spent_cents AS TEXT) AS spent_cents, typeof(spent_cents) AS type, charges, refunds FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id = ?"
  ).bind(buyer).first<{ spent_cents: string; type: string; charges: number; refunds: number }>()

const apply = async (facts: ReadonlyArray<Fact>) => {
  const items = facts.map((f, i) => ({ key: `${i}`, value: { fact: f } }))
  const outcomes = await Effect.runPromise(ProjectionConsumer.process(items).pipe(
    Effect.provide(Layer.mergeAll(
      ProjectionStore.ProjectionStore.layer, Placement.TenantPlacement.single(env.DB), Layer.succeed(Registry.Registry, platform.registry), KeyRing.KeyRing.over(env.LEDGER, { secretsKey: env.FACTLINE_SECRETS_KEY as string | undefined }),
      // The D1 facts copy as the example configures it (wrangler.jsonc: all).
      FactsCopy.FactsCopySetting.layer(FactsCopy.all)
    ))
  ))
  return items.map(({ key }) => outcomes.get(key))
}

describe("money above 2^53 (issue 8, defect 12)", () => {
  it("an amount that is not a safe integer is refused at ingest with a 400 naming the field", async () => {
    for (const price of ["9007199254740992", "9007199254740993", "1e20"]) {
      const event = callCompleted()
      // Raw JSON text: the digits as a client sends them, not as JavaScript would round them here.
      const body = JSON.stringify(event).replace(`"price_cents":${event.payload.price_cents}`, `"price_cents":${price}`)
      expect(body).toContain(`"price_cents":${price}`)
      const response = await request("/v1/events", { method: "POST", body, token: tokenA })
      expect(response.status).toBe(400)
      const error = (await response.json<any>()).error
      expect(error.code).toBe("invalid_events")
      expect(error.details.problems).toEqual([expect.objectContaining({ path: "payload.price_cents", message: expect.stringContaining(String(maxSafe)) })])
    }
    expect((await postEvents(callCompleted({}, { price_cents: maxSafe }))).status).toBe(202)
  })

  it("a budget summed past 2^53 − 1 is exact in D1 and reaches the API exact, as a decimal string", async () => {
    const buyer = unique("rich")
    // 2^53 − 1 + 2 = 9007199254740993: odd, so no double holds it (JavaScript reads it as ...992).
    const calls = [callCompleted({}, { buyer_id: buyer, duration_s: 90, price_cents: maxSafe }), callCompleted({}, { buyer_id: buyer, duration_s: 90, price_cents: 2 })]
    expect((await postEvents({ events: calls })).status).toBe(202)
    const stored = await eventually(async () => {
      const row = await storedBudget(buyer)
      return row?.charges === 2 ? row : undefined
    }, 40_000, "both charges")
    expect(stored).toEqual({ spent_cents: "9007199254740993", type: "integer", charges: 2, refunds: 0 })

    const response = await request(`/v1/projections/buyer_budgets?buyer_id=${buyer}`, { token: tokenA })
    expect(response.status).toBe(200)
    const text = await response.text()
    // A JSON number here would be read back (by any JSON parser using doubles) as 9007199254740992.
    expect(text).toContain('"spent_cents":"9007199254740993"')
    expect(JSON.parse(text).data).toEqual([{ buyer_id: buyer, spent_cents: "9007199254740993", charges: 2, refunds: 0 }])

    // Values within the safe range stay numbers.
    const call = await (await request(`/v1/projections/calls?call_id=${calls[0]!.subject}`, { token: tokenA })).json<any>()
    expect(call.data[0]).toMatchObject({ call_id: calls[0]!.subject, charged_cents: maxSafe })

    // And a refund brings the sum back below 2^53: a number again.
    const refundOf = calls[0]!.subject
    expect((await postEvents({ schema_version: 1, message_type: "call.dispute", idempotency_key: unique("d"), subject: refundOf, payload: { call_id: refundOf, reason: "x" } })).status).toBe(202)
    await eventually(async () => ((await storedBudget(buyer))?.refunds === 1 ? true : undefined), 40_000, "the refund")
    const after = await (await request(`/v1/projections/buyer_budgets?buyer_id=${buyer}`, { token: tokenA })).json<any>()
    expect(after.data).toEqual([{ buyer_id: buyer, spent_cents: 2, charges: 2, refunds: 1 }])
  }, 90_000)

  it("an increment or column value that is not a safe integer fails that fact permanently (UnsafeInteger), never a rounded row", async () => {
    const buyer = unique("buyer")
    const call = unique("call")
    // Past the ingest check (a fact written by other code, or a projection that computes its increment).
    const charge = await storedFact(call, 3, "charge", { call_id: call, buyer_id: buyer, amount_cents: 2 ** 53 + 2, currency: "EUR" })
    const [outcome] = await apply([charge])
    expect(outcome).toMatchObject({ _tag: "Failure", failure: { retryable: false, reason: "permanent_failure" } })
    const error = (outcome as { failure: { message: string } }).failure.message
    expect(error).toContain('projection "buyer_budgets"')
    expect(error).toContain('projection "calls"')
    expect(error).toMatch(/UnsafeInteger: .*increment 9007199254740994 for spent_cents/)
    expect(error).toMatch(/UnsafeInteger: .*value 9007199254740994 for charged_cents/)
    expect(await storedBudget(buyer)).toBe(null)
    expect(await env.DB.prepare("SELECT call_id FROM calls WHERE tenant_id = 'tenant-a' AND call_id = ?").bind(call).first()).toBe(null)
    // The facts copy still has it (projections are isolated from each other).
    expect(await env.DB.prepare("SELECT fact_id FROM facts WHERE fact_id = ?").bind(charge.fact_id).first()).toEqual({ fact_id: charge.fact_id })
  })
})
