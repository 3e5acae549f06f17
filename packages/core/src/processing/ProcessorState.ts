/**
 * What a processor that declares `reads` receives beside its fact: the state of the fact's stream before
 * it — the stream's facts of the declared types with a sequence below the fact's, each in its type's
 * latest shape (and its personal fields opened, as a decider's fold sees them), folded with `evolve` from
 * `initialState`. Bounded by the fact's sequence, the state does not depend on what was appended since,
 * so a redelivered fact derives the same facts (the same ids: no duplicates).
 *
 * One ledger read of the whole stream per fact and processor that declares `reads`; a processor that
 * declares nothing reads nothing. A ledger that cannot be read is transient (the fact is retried); a
 * fact the code cannot read (newer than it) fails the fact permanently; a throw in `evolve` is a defect.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { Fact } from "@factline/schemas"
import type * as Processor from "../definitions/Processor.js"
import { TransientError } from "../failures/Failure.js"
import { Ledger } from "../ledger/Ledger.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import { Registry } from "../registry/Registry.js"

/** The stream could not be read (or opened): the fact is retried, as any processor's transient failure. */
const transient = <A, R>(effect: Effect.Effect<A, { readonly message: string }, R>) =>
  Effect.mapError(effect, (error) => new TransientError({ message: `reading the stream for a processor: ${error.message}` }))

/** The processor's state as of `fact` (undefined when it declares no `reads`). */
export const before = Effect.fn("ProcessorState.before")(function*(processor: Processor.Any, fact: Fact) {
  const fold = processor.stream
  if (fold === undefined) return undefined
  const { latest, personalFact, hasPersonalData } = yield* Registry
  const [state] = yield* transient((yield* Ledger).readStreams([{ tenant_id: fact.tenant_id, stream: fact.stream }]))
  const stored = (state?.facts ?? []).filter((f) => f.sequence < fact.sequence && fold.folds.has(f.type))
  const facts = hasPersonalData ? yield* transient(Sealing.openFacts(yield* KeyRing, personalFact, stored)) : stored
  let folded = fold.initialState
  for (const each of facts) {
    const current = latest(each)
    if (Result.isFailure(current)) return yield* current.failure
    folded = fold.evolve(folded, current.success)
  }
  return folded
})

/** Runs the processor with its state when it declares `reads`, else with the fact alone. */
export const run = (processor: Processor.Any, fact: Fact) =>
  processor.stream === undefined ? processor.process(fact, undefined) : Effect.flatMap(before(processor, fact), (state) => processor.process(fact, state))
