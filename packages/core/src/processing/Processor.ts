/**
 * Fact processors: registered per fact type, they derive new facts from a
 * fact ("outcome → qualification → charge").
 *
 * Derived facts go back into the same stream of the ledger with deterministic
 * ids (parent fact id + processor + position) and carry the parent's id as
 * `causation_id` and its `correlation_id`, so a re-delivered fact derives
 * nothing new. A processor is a pure Effect over the fact; failures are typed
 * like handlers' (`TransientError` | `PermanentError`).
 */
import type { Effect } from "effect"
import type { Fact } from "@factline/schemas"
import type { FactDefinition, NewFact } from "../ledger/FactDefinition.js"
import type { HandlerError } from "../routing/HandlerError.js"

export interface Processor {
  readonly name: string
  readonly factType: string
  readonly process: (fact: Fact) => Effect.Effect<ReadonlyArray<NewFact>, HandlerError>
}

export const make = <T extends string, D>(
  fact: FactDefinition<T, D>,
  options: {
    readonly name: string
    readonly process: (fact: Fact & { readonly type: T; readonly data: D & Record<string, unknown> }) => Effect.Effect<ReadonlyArray<NewFact>, HandlerError>
  }
): Processor => {
  if (!/^[a-z][a-z0-9_.-]*$/.test(options.name)) throw new Error(`processor name "${options.name}" must be lower-case (it is part of every fact id it derives)`)
  return { name: options.name, factType: fact.type, process: options.process as Processor["process"] }
}
