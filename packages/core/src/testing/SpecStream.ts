/**
 * The stream a spec sets up and reads (Specs, WorkflowSpec): given facts appended as another writer would
 * have appended them (timer requests recorded as the runtime records them), the stream read back, and the
 * stream's timers fired after a `TestClock` moved on.
 */
import type { Duration } from "effect"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/testing/TestClock"
import type { Fact } from "@factline/schemas"
import type { NewFact } from "../definitions/FactDefinition.js"
import * as Timer from "../definitions/Timer.js"
import * as FactId from "../ledger/FactId.js"
import { Ledger } from "../ledger/Ledger.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import { Registry } from "../registry/Registry.js"
import type { FactDraft } from "../ledger/LedgerProtocol.js"
import type * as TestPlatform from "./TestPlatform.js"
import { SpecError } from "./SpecError.js"

/** Facts already in the stream: drafts (`Charge.make(…)`), stored facts (`fact(…)`), or timer requests (`Timer.schedule(…)`). */
export type Given = ReadonlyArray<NewFact<string, unknown> | Fact | Timer.Request>
const isStored = (f: NewFact<string, unknown> | Fact): f is Fact => "fact_id" in f
const givenAt = new Date(Date.UTC(2026, 0, 1)).toISOString()

/** Appends given facts to a stream as another writer would have (ids from their position). */
export const appendGiven = (platform: TestPlatform.TestPlatform, tenant_id: string, stream: string, given: Given) =>
  given.length === 0
    ? Promise.resolve()
    : platform.run(Effect.gen(function*() {
      const facts = yield* Effect.promise(() =>
        Promise.all(given.map((g) => (Timer.isRequest(g) ? Timer.record(g, givenAt) : g)).map(async (f, position): Promise<FactDraft> => ({
          fact_id: isStored(f) ? f.fact_id : await FactId.make({ tenantId: tenant_id, cause: `given:${stream}`, decidedBy: "given", position }),
          type: f.type,
          data: f.data as Record<string, unknown>,
          ...(isStored(f) && f.schema_version !== undefined ? { schema_version: f.schema_version } : {}),
          causation_id: isStored(f) ? f.causation_id : `given:${position}`,
          correlation_id: isStored(f) ? f.correlation_id : "given",
          caused_by: isStored(f) ? f.caused_by : "given",
          created_at: isStored(f) ? f.created_at : givenAt
        })))
      )
      const ledger = yield* Ledger
      const [result] = yield* ledger.append([{ tenant_id, stream, facts }])
      if (result?.status !== "appended" && result?.status !== "duplicate") throw new SpecError(`the given facts could not be appended: ${JSON.stringify(result)}`)
    }))

/** Stored facts as a spec sees them: personal fields opened, as product code sees them (they are stored sealed). */
export const opened = (facts: ReadonlyArray<Fact>) =>
  Effect.gen(function*() {
    const registry = yield* Registry
    return registry.hasPersonalData ? yield* Sealing.openFacts(yield* KeyRing, registry.personalFact, facts) : facts
  }).pipe(Effect.orDie)

/** The stream as stored, its facts opened (`opened`). */
export const readStream = (platform: TestPlatform.TestPlatform, tenant_id: string, stream: string) =>
  platform.run(Effect.flatMap(Effect.service(Ledger), (ledger) => ledger.read({ tenant_id, stream })).pipe(
    Effect.flatMap((state) => Effect.map(opened(state.facts), (facts) => ({ ...state, facts })))
  ))

/**
 * Moves the TestClock on by `elapsed` and fires the timers then due, twice (a timer must fire once): the
 * facts the stream's timers appended meanwhile.
 */
export const fireAfter = (platform: TestPlatform.TestPlatform, tenant_id: string, stream: string, elapsed: Duration.Input, what: string) =>
  Effect.gen(function*() {
    const read = Effect.flatMap(Effect.service(Ledger), (ledger) => ledger.read({ tenant_id, stream }))
    const fire = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.promise(() => Promise.all([...platform.ledger.shards.values()].map((shard) => shard.fireTimers(now)))))
    const before = yield* read
    yield* TestClock.adjust(elapsed)
    yield* fire
    const fired = yield* read
    yield* fire
    if ((yield* read).version !== fired.version) throw new SpecError(`${what}: a timer fired twice`)
    return yield* opened(fired.facts.filter((f) => f.sequence > before.version))
  })
