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
 *
 * A processor that needs the state of its subject's stream declares it, as a decider does: `reads` (the
 * fact types folded), `initialState` and `evolve`; `process(fact, state)` then gets the fold of the
 * stream's facts of those types that precede the fact (sequence below its own; each in its latest
 * shape). The state is as of the fact, whatever was appended since, so a redelivered fact derives the
 * same facts. It costs one ledger read of the stream per fact (ProcessorState); processors that declare
 * nothing read nothing.
 */
import type { Effect } from "effect"
import type * as FactDefinition from "./FactDefinition.js"
import type { HandlerError } from "../failures/Failure.js"
import * as Naming from "./Naming.js"
import type * as Timer from "./Timer.js"

type Defs = ReadonlyArray<FactDefinition.Any>

/** What a processor declaring `E` returns: facts of `E`, and timer requests for facts of `E`. */
export type Output<E extends Defs = Defs> = ReadonlyArray<FactDefinition.DraftOf<E> | Timer.Request<FactDefinition.DraftOf<E>>>

/** How a processor folds its subject's stream: the fact types it reads, from `initialState` with `evolve`. */
export interface StreamFold<S = any> {
  readonly reads: Defs
  /** The fact types `evolve` sees (`reads`); the stream's other facts are skipped. */
  readonly folds: ReadonlySet<string>
  readonly initialState: S
  readonly evolve: (state: S, fact: any) => S
}

/**
 * `Services` is the Effect requirement (`R`) of `process`: what its module's layer must provide. `S` is the
 * state of its stream it folds (`undefined` for a processor that reads none).
 */
export interface Processor<T extends string = string, D = any, E extends Defs = Defs, Services = never, S = undefined> {
  readonly _tag: "Processor"
  readonly name: string
  /** The fact type it listens to. */
  readonly factType: T
  readonly fact: FactDefinition.FactDefinition<T, D>
  readonly emits: E
  /** Its stream's fold, when it declared `reads`: the state `process` receives. */
  readonly stream: StreamFold<S> | undefined
  readonly process: (fact: FactDefinition.StoredFact<T, D>, state: S) => Effect.Effect<Output<E>, HandlerError, Services>
}

export type Any = Processor<any, any, any, any, any>

/** The services a processor requires (its Effect's `R`). */
export type ServicesOf<P> = P extends Processor<any, any, any, infer S> ? S : never

/**
 * A processor of `fact`. With `reads`, `initialState` and `evolve` it also receives the state of the fact's
 * stream before the fact: `process(fact, state)`; `evolve` is typed by the union of `reads`
 * (`FactDefinition.FactOf`), so a shared one can serve several processors and deciders.
 */
export function make<T extends string, D, const E extends Defs, S, const R extends Defs, Services = never>(
  fact: FactDefinition.FactDefinition<T, D>,
  options: {
    readonly name: string
    readonly emits: E
    readonly reads: R
    readonly initialState: S
    readonly evolve: (state: S, fact: FactDefinition.FactOf<R>) => S
    readonly process: (fact: FactDefinition.StoredFact<T, D>, state: S) => Effect.Effect<Output<E>, HandlerError, Services>
  }
): Processor<T, D, E, Services, S>
export function make<T extends string, D, const E extends Defs, Services = never>(
  fact: FactDefinition.FactDefinition<T, D>,
  options: {
    readonly name: string
    readonly emits: E
    readonly process: (fact: FactDefinition.StoredFact<T, D>) => Effect.Effect<Output<E>, HandlerError, Services>
  }
): Processor<T, D, E, Services>
export function make(
  fact: FactDefinition.Any,
  options: {
    readonly name: string
    readonly emits: Defs
    readonly reads?: Defs
    readonly initialState?: unknown
    readonly evolve?: (state: unknown, fact: any) => unknown
    readonly process: (fact: any, state: any) => Effect.Effect<Output, HandlerError, any>
  }
): Any {
  Naming.check("processor", options.name)
  const stream: StreamFold | undefined = options.reads === undefined ? undefined : {
    reads: options.reads,
    folds: new Set(options.reads.map((f) => f.type)),
    initialState: options.initialState,
    evolve: options.evolve ?? ((state) => state)
  }
  return { _tag: "Processor", name: options.name, factType: fact.type, fact, emits: options.emits, stream, process: options.process }
}
