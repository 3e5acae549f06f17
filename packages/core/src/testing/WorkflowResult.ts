/**
 * What a `WorkflowSpec` run gives (`WorkflowResult`), what a spec may expect of it (`Expected`), and the
 * comparison of the two: each field given is compared (as JSON, keys sorted), durations as their largest
 * whole unit, so that "48 hours" and "2 days" are the same.
 */
import * as Duration from "effect/Duration"
import type { Fact } from "@factline/schemas"
import type { NewFact } from "../definitions/FactDefinition.js"
import type * as Runner from "../workflows/Runner.js"
import type { ServiceCall } from "./ServiceCalls.js"
import { json, same, SpecError } from "./SpecError.js"

/** How the run ended: the runtime's outcome, or not started (the workflow's `when` refused the fact). */
export type Outcome = Runner.Ended | { readonly _tag: "NotStarted" }

export interface WorkflowResult {
  readonly outcome: Outcome
  readonly instanceId: string
  /** The steps in the order they first ran: Activities by name, `append/<step>`, `emit/<step>`, `wait/<name>`, `sleep/<name>`. */
  readonly steps: ReadonlyArray<string>
  /** The steps run as compensations (after the body failed), in the order they ran. */
  readonly compensations: ReadonlyArray<string>
  /** Attempts per step that ran (1: first time). */
  readonly attempts: Readonly<Record<string, number>>
  /** The facts it appended, as stored. */
  readonly facts: ReadonlyArray<Fact>
  /** The messages it emitted (envelopes as queued). */
  readonly emitted: ReadonlyArray<{ readonly message_type: string; readonly payload: unknown; readonly idempotency_key: string; readonly subject: string }>
  readonly sleeps: ReadonlyArray<{ readonly name: string; readonly ms: number }>
  readonly waits: ReadonlyArray<{ readonly name: string; readonly timeoutMs: number; readonly answer: string }>
  /** Every service call of the run, its replay and the redelivered attempts. */
  readonly calls: ReadonlyArray<ServiceCall>
}

/** What a spec expects; a field left out is not checked. */
export interface Expected {
  /** The steps in the order they first ran, compensations included (see `WorkflowResult.steps`). */
  readonly steps?: ReadonlyArray<string>
  /** The facts appended (type and data, in order). */
  readonly facts?: ReadonlyArray<NewFact<string, unknown>>
  /** The messages emitted (type and payload, in order). */
  readonly emitted?: ReadonlyArray<{ readonly type: string; readonly payload: unknown }>
  /** The compensations run, in order. */
  readonly compensations?: ReadonlyArray<string>
  /** The sleeps, with their durations. */
  readonly sleeps?: ReadonlyArray<{ readonly name: string; readonly duration: Duration.Input }>
  /** The waits: the fact type that answered each, or `"timeout"`; with `timeout`, its duration too. */
  readonly waits?: ReadonlyArray<{ readonly name: string; readonly answer: string; readonly timeout?: Duration.Input }>
}
const millis = (duration: Duration.Input) => Duration.toMillis(Duration.fromInputUnsafe(duration))

const units: ReadonlyArray<readonly [string, number]> = [["days", 86_400_000], ["hours", 3_600_000], ["minutes", 60_000], ["seconds", 1_000]]
/** A duration as the largest whole unit (`172800000` → `2 days`), so that "48 hours" and "2 days" compare equal. */
const shown = (ms: number) => {
  const unit = units.find(([, size]) => ms >= size && ms % size === 0)
  return unit === undefined ? `${ms} millis` : `${ms / unit[1]} ${unit[0]}`
}
/** Fails with a `SpecError` (a diff) on the first field of `expected` the result does not match. */
export const check = (what: string, result: WorkflowResult, expected: Expected): void => {
  const compare = (difference: string, actual: unknown, wanted: unknown) => {
    if (!same(actual, wanted)) throw new SpecError(`${what} ${difference} than expected`, json(actual), json(wanted))
  }
  if (expected.steps !== undefined) compare("ran other steps", result.steps, expected.steps)
  if (expected.facts !== undefined) {
    compare("appended other facts", result.facts.map(({ type, data }) => ({ type, data })), expected.facts.map(({ type, data }) => ({ type, data })))
  }
  if (expected.emitted !== undefined) {
    compare("emitted other messages", result.emitted.map((m) => ({ type: m.message_type, payload: m.payload })), expected.emitted)
  }
  if (expected.compensations !== undefined) compare("ran other compensations", result.compensations, expected.compensations)
  if (expected.sleeps !== undefined) {
    compare("slept otherwise", result.sleeps.map((s) => ({ name: s.name, duration: shown(s.ms) })), expected.sleeps.map((s) => ({ name: s.name, duration: shown(millis(s.duration)) })))
  }
  if (expected.waits !== undefined) {
    compare(
      "waited otherwise",
      result.waits.map((w, i) => ({ name: w.name, answer: w.answer, ...(expected.waits?.[i]?.timeout === undefined ? {} : { timeout: shown(w.timeoutMs) }) })),
      expected.waits.map((w) => ({ name: w.name, answer: w.answer, ...(w.timeout === undefined ? {} : { timeout: shown(millis(w.timeout)) }) }))
    )
  }
}
