/**
 * What a product team writes: a handler or a decider for one message type.
 *
 * A **handler** maps a message to the facts to append. A **decider** also sees
 * the state of its stream: the runtime folds the stream's facts with `evolve`
 * from `initialState`, calls `decide(message, state)`, and appends with the
 * stream version it read; if another writer got there first it re-reads and
 * decides again. Both are pure Effects: their failures are typed
 * (`TransientError` | `PermanentError`), side effects belong to the runtime.
 */
import type { Effect } from "effect"
import type { Fact } from "@factline/schemas"
import type { NewFact } from "../ledger/FactDefinition.js"
import type { HandlerError } from "./HandlerError.js"
import type { MessageDefinition } from "./MessageDefinition.js"

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
}

export type Decision = ReadonlyArray<NewFact>

export interface Handler<A = any> {
  readonly _tag: "Handler"
  readonly name: string
  readonly message: MessageDefinition<string, A>
  readonly handle: (message: Message<A>) => Effect.Effect<Decision, HandlerError>
}

export interface Decider<A = any, S = any> {
  readonly _tag: "Decider"
  readonly name: string
  readonly message: MessageDefinition<string, A>
  readonly initialState: S
  readonly evolve: (state: S, fact: Fact) => S
  readonly decide: (message: Message<A>, state: S) => Effect.Effect<Decision, HandlerError>
}

export type Any = Handler | Decider

const checkName = (name: string) => {
  if (!/^[a-z][a-z0-9_.-]*$/.test(name)) throw new Error(`handler name "${name}" must be lower-case (it is part of every fact id it decides)`)
}

export const handler = <A>(
  message: MessageDefinition<string, A>,
  options: { readonly name: string; readonly handle: (message: Message<A>) => Effect.Effect<Decision, HandlerError> }
): Handler<A> => {
  checkName(options.name)
  return { _tag: "Handler", message, ...options }
}

export const decider = <A, S>(
  message: MessageDefinition<string, A>,
  options: {
    readonly name: string
    readonly initialState: S
    readonly evolve: (state: S, fact: Fact) => S
    readonly decide: (message: Message<A>, state: S) => Effect.Effect<Decision, HandlerError>
  }
): Decider<A, S> => {
  checkName(options.name)
  return { _tag: "Decider", message, ...options }
}
