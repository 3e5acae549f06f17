/**
 * What a product team writes: a handler or a decider for one message type.
 *
 * A **handler** maps a message to the facts to append. A **decider** also sees
 * the state of its stream: the runtime folds the stream's facts of the types
 * it declares (`emits` and `reads`) with `evolve` from `initialState`, calls
 * `decide(message, state)`, and appends with the stream version it read; if
 * another writer got there first it re-reads and decides again. Both are pure
 * Effects: their failures are typed (`TransientError` | `PermanentError`),
 * side effects belong to the runtime. Their requirement (`Services`, an
 * Effect's `R`) is what their module's `layer` provides (`Module.make` does
 * not compile otherwise); a throw or an `Effect.die` is a defect
 * (`Failure.Defect`).
 *
 * A decider may declare a **snapshot** (`snapshot: { schema, version, every }`): the runtime then stores its
 * folded state, encoded with `schema`, in the stream's ledger shard every `every` facts, and folds from the
 * latest snapshot of this `version` plus the facts after it. Raise `version` whenever `evolve` (or what the
 * state means) changes: a snapshot of another version is never used. The kit's `DeciderSpec.checkSnapshot`
 * folds a history fully and from a snapshot taken midway and fails when they differ.
 *
 * Both declare the facts they may emit (`emits: [Refund, DisputeRejected]`):
 * returning any other fact does not compile, and the registry validates every
 * returned fact against its definition before it is appended.
 */
import type { Effect } from "effect"
import type * as Schema from "effect/Schema"
import type * as FactDefinition from "./FactDefinition.js"
import type { HandlerError } from "../failures/Failure.js"
import type { MessageDefinition } from "./MessageDefinition.js"
import * as Naming from "./Naming.js"
import type * as Timer from "./Timer.js"

/** A decoded, upcast message as a handler sees it. */
export interface Message<A> {
  readonly payload: A
  readonly messageType: string
  /** The version the producer sent; the payload is always the latest version. */
  readonly receivedSchemaVersion: number
  readonly messageId: string
  readonly idempotencyKey: string
  readonly correlationId: string
  readonly causationId: string | undefined
  readonly tenantId: string
  readonly subject: string
  readonly source: string
  readonly createdAt: string
  /** W3C trace context of the message (absent on messages from before trace context). */
  readonly traceparent?: string | undefined
}

type Defs = ReadonlyArray<FactDefinition.Any>

/** The facts a handler or decider declaring `E` returns (and timer requests for facts of `E`: Timer.ts). */
export type Decision<E extends Defs = Defs> = ReadonlyArray<FactDefinition.DraftOf<E> | Timer.Request<FactDefinition.DraftOf<E>>>

/** `Services` is the Effect requirement (`R`) of its code: what its module's layer must provide. */
export interface Handler<A = any, E extends Defs = Defs, Services = never> {
  readonly _tag: "Handler"
  readonly name: string
  readonly message: MessageDefinition<string, A>
  readonly emits: E
  readonly handle: (message: Message<A>) => Effect.Effect<Decision<E>, HandlerError, Services>
}

/** How a decider's state is snapshotted (Decider.snapshot). */
export interface SnapshotOptions<S> {
  /** The state's schema: its encoded side must be JSON (what is stored); decoded back when read. */
  readonly schema: Schema.Codec<S, unknown>
  /** A positive integer, raised whenever `evolve` or the state's meaning changes: other versions' snapshots are never used. */
  readonly version: number
  /** How many facts after the latest snapshot a decision may fold before it writes a new one (default `defaultSnapshotEvery`). */
  readonly every?: number
}

/** A decider's snapshot declaration, resolved. */
export interface Snapshot<S> {
  readonly schema: Schema.Codec<S, unknown>
  readonly version: number
  readonly every: number
  /**
   * What else a stored snapshot must match to be used: its version and the fact types (at their latest schema
   * versions) the decider folds, so adding a `reads` type or a fact version retires old snapshots by itself.
   * It cannot see a change in `evolve`'s code: raising `version` is the team's (the spec check catches it).
   */
  readonly fingerprint: string
}

/**
 * Default `every`: a decision folds at most ~100 facts past its snapshot (a few hundred microseconds), while the
 * snapshot row is rewritten once per ~100 facts (≈1 % more rows written than the facts themselves).
 */
export const defaultSnapshotEvery = 100

export interface Decider<A = any, S = any, E extends Defs = Defs, R extends Defs = Defs, Services = never> {
  readonly _tag: "Decider"
  readonly name: string
  readonly message: MessageDefinition<string, A>
  readonly emits: E
  /** Facts of other handlers or processors the state is folded from (its own `emits` are folded too). */
  readonly reads: R
  /** The fact types `evolve` sees: `emits` and `reads`; the stream's other facts are skipped. */
  readonly folds: ReadonlySet<string>
  readonly initialState: S
  readonly evolve: (state: S, fact: FactDefinition.FactOf<[...E, ...R]>) => S
  readonly decide: (message: Message<A>, state: S) => Effect.Effect<Decision<E>, HandlerError, Services>
  /** Its snapshot declaration, if any: the runtime folds from the latest stored snapshot of this version. */
  readonly snapshot: Snapshot<S> | undefined
}

export type Any = Handler<any, any, any> | Decider<any, any, any, any, any>

/** The services a handler or decider requires (its Effect's `R`). */
export type ServicesOf<H> = H extends Handler<any, any, infer S> ? S : H extends Decider<any, any, any, any, infer S> ? S : never

export const handler = <A, const E extends Defs, Services = never>(
  message: MessageDefinition<string, A>,
  options: {
    readonly name: string
    readonly emits: E
    readonly handle: (message: Message<A>) => Effect.Effect<Decision<E>, HandlerError, Services>
  }
): Handler<A, E, Services> => {
  Naming.check("handler", options.name)
  return { _tag: "Handler", message, name: options.name, emits: options.emits, handle: options.handle }
}

export const decider = <A, S, const E extends Defs, const R extends Defs = [], Services = never>(
  message: MessageDefinition<string, A>,
  options: {
    readonly name: string
    readonly emits: E
    readonly reads?: R
    readonly initialState: S
    readonly evolve: (state: S, fact: FactDefinition.FactOf<[...E, ...R]>) => S
    readonly decide: (message: Message<A>, state: S) => Effect.Effect<Decision<E>, HandlerError, Services>
    readonly snapshot?: SnapshotOptions<S>
  }
): Decider<A, S, E, R, Services> => {
  Naming.check("decider", options.name)
  const reads = (options.reads ?? []) as R
  const snapshot = options.snapshot === undefined ? undefined : snapshotOf(options.name, options.snapshot, [...options.emits, ...reads])
  return {
    _tag: "Decider",
    message,
    name: options.name,
    emits: options.emits,
    reads,
    folds: new Set([...options.emits, ...reads].map((f) => f.type)),
    initialState: options.initialState,
    evolve: options.evolve,
    decide: options.decide,
    snapshot
  }
}

const positiveInteger = (n: unknown) => typeof n === "number" && Number.isInteger(n) && n >= 1

const snapshotOf = <S>(name: string, options: SnapshotOptions<S>, folded: ReadonlyArray<FactDefinition.Any>): Snapshot<S> => {
  if (!positiveInteger(options.version)) throw new Error(`decider ${name}: snapshot.version must be a positive integer, got ${String(options.version)}`)
  const every = options.every ?? defaultSnapshotEvery
  if (!positiveInteger(every)) throw new Error(`decider ${name}: snapshot.every must be a positive integer, got ${String(every)}`)
  const types = [...new Set(folded.map((f) => `${f.type}@${f.latestVersion}`))].sort()
  return { schema: options.schema, version: options.version, every, fingerprint: `v${options.version};${types.join(",")}` }
}
