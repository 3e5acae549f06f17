/**
 * A fact type with its data schema: `FactDefinition.make("charge", ChargeData)`.
 *
 * The definition is the only way to name a fact type in product code, so a
 * misspelled type is a compile error, not a projection that never fires:
 * handlers and processors declare the definitions they emit and return
 * `Charge.make({...})` (typed data); deciders fold a typed union of the facts
 * they declare; projections map `Projection.on(Charge, (data) => …)`. At run
 * time the registry validates every fact a handler or processor returns
 * against its definition's schema before it reaches the ledger: a wrongly
 * shaped fact is a permanent failure naming the field, never a stored fact.
 *
 * Fact data is stored as JSON, so a fact schema should describe JSON values
 * (its decoded and encoded forms the same: structs, strings, numbers,
 * booleans, arrays, literals).
 */
import { Result, type Schema } from "effect"
import { type Fact, Issues } from "@factline/schemas"
import * as Naming from "./Naming.js"

/** What a handler returns: a fact to append, before the ledger gives it an id and a sequence. */
export interface NewFact<T extends string = string, D = Record<string, unknown>> {
  readonly type: T
  readonly data: D
}

/** A stored fact of one type, its data typed. */
export type StoredFact<T extends string = string, D = unknown> = Omit<Fact, "type" | "data"> & { readonly type: T; readonly data: D }

export interface FactDefinition<T extends string = string, D = any> {
  readonly _tag: "FactDefinition"
  readonly type: T
  readonly schema: Schema.Top
  /** A typed draft to return from a handler or processor. */
  readonly make: (data: D) => NewFact<T, D>
  readonly is: (fact: Fact | StoredFact) => fact is StoredFact<T, D> & Fact
  /** The fact's data, typed (no validation: stored facts were validated before they were appended). */
  readonly data: (fact: Fact | StoredFact) => D
  /** Validates data against the schema; problems name the field (`data.amount_cents`). */
  readonly validate: (data: unknown) => Result.Result<D, ReadonlyArray<Issues.Problem>>
}

export type Any = FactDefinition<string, any>
export type TypeOf<F> = F extends FactDefinition<infer T, any> ? T : never
export type DataOf<F> = F extends FactDefinition<any, infer D> ? D : never
/** The drafts a handler declaring `E` may return: one of its definitions' `make` results. */
export type DraftOf<E extends ReadonlyArray<Any>> = { [K in keyof E]: E[K] extends FactDefinition<infer T, infer D> ? NewFact<T, D> : never }[number]
/** The stored facts of the definitions in `E`, as a discriminated union on `type`. */
export type FactOf<E extends ReadonlyArray<Any>> = { [K in keyof E]: E[K] extends FactDefinition<infer T, infer D> ? StoredFact<T, D> : never }[number]

export const make = <const T extends string, S extends Schema.Top>(type: T, schema: S): FactDefinition<T, S["Type"]> => {
  Naming.check("fact type", type)
  const decode = Issues.decodeStrict(schema)
  return {
    _tag: "FactDefinition",
    type,
    schema,
    make: (data) => ({ type, data }),
    is: (fact): fact is any => fact.type === type,
    data: (fact) => fact.data as S["Type"],
    validate: (data) => {
      const result = decode(data, ["data"])
      return Result.isSuccess(result) ? Result.succeed(result.success) : Result.fail(result.failure)
    }
  }
}

export const isFactDefinition = (u: unknown): u is Any => typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "FactDefinition"
