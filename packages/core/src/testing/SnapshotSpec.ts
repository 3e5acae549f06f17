/**
 * `DeciderSpec.checkSnapshot(decider, { history, recorded })`: the check every app with a snapshotting decider
 * keeps in its specs (Handler.Snapshot). The runtime folds from a stored snapshot of the decider's
 * `snapshot.version`; a snapshot written by yesterday's `evolve` is wrong for today's if `evolve` changed and the
 * version did not. Nothing at run time can see that (a function's source is no fingerprint), so this spec does:
 *
 * - it folds `history` whole and from a snapshot taken midway (encoded to JSON and decoded with the declared
 *   schema, as the shard stores it): they must agree (a schema that drops part of the state fails here);
 * - `recorded` holds, per snapshot version, the midway snapshot (its encoded JSON) as the code of that version
 *   folded it, committed with the test. Today's fold from the recorded snapshot must equal today's whole fold,
 *   and today's midway state must equal the recorded one: a changed `evolve` under the same version fails,
 *   naming the decider and saying to raise `snapshot.version`. A version without a recording fails with the
 *   JSON to record.
 *
 * ```ts
 * it("the account decider's snapshots hold", () =>
 *   DeciderSpec.checkSnapshot(account, { history: [Opened.make({…}), Deposited.make({…}), …], recorded: { 1: { balance: 5 } } }))
 * ```
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import type { Fact } from "@factline/schemas"
import type * as FactDefinition from "../definitions/FactDefinition.js"
import type * as Handler from "../definitions/Handler.js"
import * as Routing from "../registry/Routing.js"
import { fold } from "../routing/Dispatch.js"
import * as StableJson from "../ledger/StableJson.js"
import { SpecError } from "./SpecError.js"

export interface Options {
  /** Facts of the types the decider folds (e.g. `Deposited.make({…})`), in stream order; at least two. */
  readonly history: ReadonlyArray<FactDefinition.NewFact<string, unknown>>
  /** By snapshot version: the encoded state after the first half of `history` (`Math.floor(n / 2)` facts), as that version's code folded it. */
  readonly recorded: Readonly<Record<number, unknown>>
}

/** Throws a `SpecError` naming the decider when a snapshot of its current version would fold another state than the whole history. */
export const checkSnapshot = (decider: Handler.Decider<any, any, any, any, any>, options: Options): void => {
  const snapshot = decider.snapshot
  if (snapshot === undefined) throw new SpecError(`decider ${decider.name} declares no snapshot: nothing to check`)
  const { history } = options
  if (history.length < 2) throw new SpecError(`checkSnapshot(${decider.name}): give a history of at least two facts`)
  const definitions = new Map([...decider.emits, ...decider.reads].map((d: FactDefinition.Any) => [d.type, d] as const))
  // Facts made with `Def.make` are in their type's latest shape.
  const facts: Array<Fact> = history.map((f, i) => ({
    fact_id: `history-${i + 1}`, tenant_id: "spec", stream: "spec", sequence: i + 1, type: f.type, data: f.data as Record<string, unknown>,
    schema_version: definitions.get(f.type)?.latestVersion ?? 1, causation_id: "spec", correlation_id: "spec", caused_by: "spec", created_at: "2026-01-01T00:00:00.000Z"
  }))
  const latest = Routing.latest(definitions)
  const run = (start: { state: unknown; after: number }, upTo: number) => {
    const exit = Effect.runSyncExit(fold(decider as Handler.Decider, facts.slice(0, upTo), latest, start))
    if (Exit.isFailure(exit)) throw new SpecError(`decider ${decider.name}: folding the history failed: ${String(exit.cause)}`)
    return exit.value
  }
  const encode = (state: unknown) => Schema.encodeUnknownSync(snapshot.schema)(state)
  const decode = (json: unknown) => Schema.decodeUnknownSync(snapshot.schema)(JSON.parse(JSON.stringify(json)))
  const text = (state: unknown) => StableJson.stringify(encode(state))
  const initial = { state: decider.initialState, after: 0 }
  const middle = Math.floor(facts.length / 2)
  const whole = text(run(initial, facts.length))
  const midway = encode(run(initial, middle))
  if (text(run({ state: decode(midway), after: middle }, facts.length)) !== whole) {
    throw new SpecError(`decider ${decider.name}: folding from a snapshot taken at fact ${middle} gives another state than folding the whole history: its snapshot schema does not keep the whole state (encoded ${StableJson.stringify(midway)})`)
  }
  const version = snapshot.version
  if (!(version in options.recorded)) {
    throw new SpecError(`decider ${decider.name}: no recorded snapshot for snapshot.version ${version}: add ${version}: ${StableJson.stringify(midway)} to recorded (the state after the first ${middle} facts of this history)`)
  }
  const recorded = options.recorded[version]
  let fromRecorded: string | undefined
  try {
    fromRecorded = text(run({ state: decode(recorded), after: middle }, facts.length))
  } catch {
    fromRecorded = undefined // a recording today's schema cannot decode: stale as well
  }
  if (StableJson.stringify(recorded) !== StableJson.stringify(midway) || fromRecorded !== whole) {
    throw new SpecError(
      `decider ${decider.name}: its snapshots of version ${version} were folded by another evolve — the state after ${middle} facts is now ` +
        `${StableJson.stringify(midway)}, recorded ${StableJson.stringify(recorded)}: a stored snapshot would fold a stale state. ` +
        `Raise snapshot.version (to ${version + 1}) and record its snapshot (${version + 1}: ${StableJson.stringify(midway)})`
    )
  }
}
