/**
 * Sealing and opening whole facts and payloads with the key ring, by their definitions' declarations: one key
 * ring call per tenant for a whole batch. A timer's fact (`timer_scheduled`, which carries the fact it will
 * append) is sealed inside, by the declaration of the fact it carries, so it fires sealed.
 */
import * as Effect from "effect/Effect"
import type { Fact } from "@factline/schemas"
import type * as Failure from "../failures/Failure.js"
import type { KeyFailure, KeyRing } from "./KeyRing.js"
import type { Declaration } from "./Personal.js"

/** The declaration of a fact type or message type, if it has one. */
export type DeclarationOf = (type: string) => Declaration | undefined

/** A fact or draft as sealing sees it: its tenant, its type, its data. */
export interface Sealable {
  readonly type: string
  readonly data: Readonly<Record<string, unknown>>
}

const timerType = "timer_scheduled"

interface Slot {
  readonly index: number
  readonly declaration: Declaration
  readonly value: Readonly<Record<string, unknown>>
  /** Where the sealed value goes: the fact's data, or the timer's carried fact's data. */
  readonly nested: boolean
}

const isRecord = (u: unknown): u is Readonly<Record<string, unknown>> => typeof u === "object" && u !== null && !Array.isArray(u)

const slotsOf = (declarationOf: DeclarationOf, items: ReadonlyArray<Sealable>): Array<Slot> => {
  const slots: Array<Slot> = []
  items.forEach((item, index) => {
    const own = declarationOf(item.type)
    if (own !== undefined) {
      // Data that is not an object (a malformed fact) has no fields to seal or open: left as it is, for its reader to refuse.
      if (isRecord(item.data)) slots.push({ index, declaration: own, value: item.data, nested: false })
    }
    else if (item.type === timerType && isRecord(item.data.fact) && typeof item.data.fact.type === "string" && isRecord(item.data.fact.data)) {
      const carried = declarationOf(item.data.fact.type)
      if (carried !== undefined) slots.push({ index, declaration: carried, value: item.data.fact.data, nested: true })
    }
  })
  return slots
}

const apply = <A extends Sealable>(items: ReadonlyArray<A>, slots: ReadonlyArray<Slot>, values: ReadonlyArray<Record<string, unknown>>): ReadonlyArray<A> => {
  if (slots.every((slot, i) => values[i] === slot.value)) return items
  const out = [...items]
  slots.forEach((slot, i) => {
    const value = values[i]!
    if (value === slot.value) return
    const item = out[slot.index]!
    out[slot.index] = slot.nested
      ? { ...item, data: { ...item.data, fact: { ...(item.data.fact as Record<string, unknown>), data: value } } }
      : { ...item, data: value }
  })
  return out
}

const run = <A extends Sealable, E>(
  declarationOf: DeclarationOf,
  tenant: string,
  items: ReadonlyArray<A>,
  call: (tenant: string, items: ReadonlyArray<{ readonly declaration: Declaration; readonly value: Readonly<Record<string, unknown>> }>) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, E>
): Effect.Effect<ReadonlyArray<A>, E> => {
  const slots = slotsOf(declarationOf, items)
  if (slots.length === 0) return Effect.succeed(items)
  return Effect.map(call(tenant, slots), (values) => apply(items, slots, values))
}

/** One tenant's facts or drafts with their personal fields sealed. */
export const seal = <A extends Sealable>(keyRing: KeyRing["Service"], declarationOf: DeclarationOf, tenant: string, items: ReadonlyArray<A>): Effect.Effect<ReadonlyArray<A>, KeyFailure> =>
  run(declarationOf, tenant, items, keyRing.seal)

/** One tenant's facts or drafts with their personal fields opened (or the erased marker). */
export const open = <A extends Sealable>(keyRing: KeyRing["Service"], declarationOf: DeclarationOf, tenant: string, items: ReadonlyArray<A>): Effect.Effect<ReadonlyArray<A>, Failure.Unavailable> =>
  run(declarationOf, tenant, items, keyRing.open)

/** Stored facts of any tenants, opened for product code, in input order (the same array when nothing is personal). */
export const openFacts = (keyRing: KeyRing["Service"], declarationOf: DeclarationOf, facts: ReadonlyArray<Fact>): Effect.Effect<ReadonlyArray<Fact>, Failure.Unavailable> => {
  if (!facts.some((f) => declarationOf(f.type) !== undefined || f.type === timerType)) return Effect.succeed(facts)
  const byTenant = new Map<string, Array<number>>()
  facts.forEach((f, i) => {
    const list = byTenant.get(f.tenant_id)
    if (list) list.push(i)
    else byTenant.set(f.tenant_id, [i])
  })
  return Effect.map(
    Effect.forEach([...byTenant], ([tenant, indexes]) => Effect.map(open(keyRing, declarationOf, tenant, indexes.map((i) => facts[i]!)), (opened) => ({ indexes, opened })), { concurrency: "unbounded" }),
    (results) => {
      const out = [...facts]
      for (const { indexes, opened } of results) indexes.forEach((index, i) => (out[index] = opened[i]!))
      return out
    }
  )
}
