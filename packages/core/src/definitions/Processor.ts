/**
 * Fact processors: registered per fact type, they derive new facts from a
 * fact ("outcome → qualification → charge").
 *
 * Derived facts go back into the same stream of the ledger with deterministic
 * ids (parent fact id + processor + position) and carry the parent's id as
 * `causation_id` and its `correlation_id`, so a re-delivered fact derives
 * nothing new. A processor is a pure Effect over the typed fact; it declares
 * what it emits like a handler does; failures are typed like handlers'
 * (`TransientError` | `PermanentError`). Beside facts it may return timer
 * requests (`Timer.schedule`, `Timer.cancel`) for facts it declares; its
 * requirement (`Services`, the Effect's `R`) is provided by its module's
 * `layer`, as a handler's is.
 */
import type { Effect } from "effect"
import type * as FactDefinition from "./FactDefinition.js"
import type { HandlerError } from "../failures/Failure.js"
import * as Naming from "./Naming.js"
import type * as Timer from "./Timer.js"

type Defs = ReadonlyArray<FactDefinition.Any>

/** What a processor declaring `E` returns: facts of `E`, and timer requests for facts of `E`. */
export type Output<E extends Defs = Defs> = ReadonlyArray<FactDefinition.DraftOf<E> | Timer.Request<FactDefinition.DraftOf<E>>>

/** `Services` is the Effect requirement (`R`) of `process`: what its module's layer must provide. */
export interface Processor<T extends string = string, D = any, E extends Defs = Defs, Services = never> {
  readonly _tag: "Processor"
  readonly name: string
  /** The fact type it listens to. */
  readonly factType: T
  readonly fact: FactDefinition.FactDefinition<T, D>
  readonly emits: E
  readonly process: (fact: FactDefinition.StoredFact<T, D>) => Effect.Effect<Output<E>, HandlerError, Services>
}

export type Any = Processor<any, any, any, any>

/** The services a processor requires (its Effect's `R`). */
export type ServicesOf<P> = P extends Processor<any, any, any, infer S> ? S : never

export const make = <T extends string, D, const E extends Defs, Services = never>(
  fact: FactDefinition.FactDefinition<T, D>,
  options: {
    readonly name: string
    readonly emits: E
    readonly process: (fact: FactDefinition.StoredFact<T, D>) => Effect.Effect<Output<E>, HandlerError, Services>
  }
): Processor<T, D, E, Services> => {
  Naming.check("processor", options.name)
  return { _tag: "Processor", name: options.name, factType: fact.type, fact, emits: options.emits, process: options.process }
}
