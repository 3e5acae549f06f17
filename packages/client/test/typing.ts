/**
 * Type tests, checked by `tsc` in `npm run typecheck` (part of `npm test`): each `@ts-expect-error` line must
 * fail to compile — if a mistake below ever compiles, the directive itself becomes an error. Nothing here
 * runs (the functions are never called); it only proves that the client's types refuse these mistakes and
 * type what they read.
 */
import { Client } from "../src/index.js"
import { CallCompleted, Charge, callsProjection, Outcome } from "./Definitions.js"

declare const client: Client.Client
const options = { subject: "c1", idempotency_key: "call.completed:c1" }

export const emits = async () => {
  // The latest version (v2) compiles…
  await client.emit(CallCompleted, { call_id: "c1", buyer_id: "b1", duration_s: 90, price_cents: 300, currency: "USD" }, options)
  // @ts-expect-error — a field of the latest version is missing (v1's payload: no `currency`)
  await client.emit(CallCompleted, { call_id: "c1", buyer_id: "b1", duration_s: 90, price_cents: 300 }, options)
  // @ts-expect-error — an unknown field
  await client.emit(CallCompleted, { call_id: "c1", buyer_id: "b1", duration_s: 90, price_cents: 300, currency: "USD", colour: "red" }, options)
  // @ts-expect-error — a field of the wrong type
  await client.emit(CallCompleted, { call_id: "c1", buyer_id: "b1", duration_s: "90", price_cents: 300, currency: "USD" }, options)
  // @ts-expect-error — a fact definition is not a message definition
  await client.emit(Charge, { call_id: "c1", buyer_id: "b1", amount_cents: 1, currency: "USD" }, options)
  // @ts-expect-error — the envelope needs a subject
  await client.emit(CallCompleted, { call_id: "c1", buyer_id: "b1", duration_s: 90, price_cents: 300, currency: "USD" }, { idempotency_key: "k" })
}

export const reads = async () => {
  const { facts } = await client.readStream("c1", { types: [Outcome, Charge] })
  for (const fact of facts) {
    // Narrowing on `type` types `data`.
    if (fact.type === "charge") {
      const cents: number = fact.data.amount_cents
      // @ts-expect-error — a charge has no `duration_s`
      void fact.data.duration_s
      void cents
    }
    // @ts-expect-error — only the definitions asked for: `qualification` is not one of them
    if (fact.type === "qualification") void fact
  }
  // Without definitions: every fact as stored, its data untyped.
  const all = await client.readStream("c1")
  const data: Readonly<Record<string, unknown>> | undefined = all.facts[0]?.data
  void data

  const charges = await client.readFacts({ type: Charge })
  const amount: number | undefined = charges.data[0]?.data.amount_cents
  void amount

  const { data: rows } = await client.readProjection(callsProjection, { where: { buyer_id: "b1", qualified: true } })
  const row = rows[0]!
  const charged: number = row.charged_cents
  const qualified: boolean | null = row.qualified
  void [charged, qualified]
  // @ts-expect-error — tenant_id is never returned (the query API scopes by the token's tenant)
  void row.tenant_id
  // @ts-expect-error — nor the `<type>_seq` bookkeeping columns
  void row.outcome_seq
  // @ts-expect-error — a column the table does not have
  await client.readProjection(callsProjection, { where: { duration: 90 } })
  // @ts-expect-error — a filter of the wrong type
  await client.readProjection(callsProjection, { where: { qualified: "yes" } })
  // By name: rows untyped, any column.
  const byName = await client.readProjection("calls", { where: { duration_s: 90 } })
  const value: unknown = byName.data[0]?.call_id
  void value
}
