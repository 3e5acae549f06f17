/**
 * A fact type with its data schema: `FactDefinition.make("outcome", OutcomeData)`.
 *
 * Gives handlers a typed constructor (`Outcome.make({...})`) and deciders a typed
 * guard (`Outcome.is(fact)`). It validates nothing at append time by itself; the
 * constructor is typed, which is where mistakes are caught.
 */
import type { Schema } from "effect"
import type { Fact } from "@factline/schemas"

/** What a handler returns: a fact to append, before the ledger gives it an id and a sequence. */
export interface NewFact<T extends string = string, D = Record<string, unknown>> {
  readonly type: T
  readonly data: D
}

export interface FactDefinition<T extends string, D> {
  readonly type: T
  readonly schema: Schema.Top
  readonly make: (data: D) => NewFact<T, D>
  readonly is: (fact: Fact) => fact is Fact & { readonly type: T; readonly data: D & Record<string, unknown> }
  /** The fact's data, typed (for projections and processors keyed by this type). */
  readonly data: (fact: Fact) => D
}

export const make = <T extends string, S extends Schema.Top>(type: T, schema: S): FactDefinition<T, S["Type"]> => {
  if (!/^[a-z][a-z0-9_]*$/.test(type)) throw new Error(`fact type "${type}" must be a lower-case word, e.g. outcome`)
  return {
    type,
    schema,
    make: (data) => ({ type, data }),
    is: (fact): fact is any => fact.type === type,
    data: (fact) => fact.data as S["Type"]
  }
}
