/**
 * Test-only message types, registered beside the example's calls module in the
 * test Worker: a decider whose decision depends on its stream, a handler that
 * fails transiently a given number of times, one that always fails, and one
 * that fails permanently; and a projection whose mapping throws for marked
 * buyers (it writes nothing otherwise, so it changes no other test's rows).
 */
import { Effect, Schema } from "effect"
import { FactDefinition, Handler, MessageDefinition, Module, PermanentError, Processor, Projection, TransientError } from "@factline/core"
import * as Tables from "../src/calls/Tables.js"

export const Bump = MessageDefinition.command("test.counter.bump").version(1, Schema.Struct({ by: Schema.String }))
export const Bumped = FactDefinition.make("bumped", Schema.Struct({ n: Schema.Int, by: Schema.String }))

export const bumpCounter = Handler.decider(Bump, {
  name: "bump-counter",
  initialState: 0,
  evolve: (n: number, fact) => (Bumped.is(fact) ? fact.data.n : n),
  decide: (m, n) => Effect.succeed([Bumped.make({ n: n + 1, by: m.payload.by })])
})

/** Failures so far, per idempotency key: the isolate outlives a test's deliveries. */
export const flakyFailures = new Map<string, number>()

export const Flaky = MessageDefinition.event("test.flaky.happened").version(1, Schema.Struct({ fail_times: Schema.Int }))
export const flaky = Handler.handler(Flaky, {
  name: "flaky",
  handle: (m) => {
    const seen = flakyFailures.get(m.idempotencyKey) ?? 0
    if (seen < m.payload.fail_times) {
      flakyFailures.set(m.idempotencyKey, seen + 1)
      return Effect.fail(new TransientError({ message: `downstream timeout #${seen + 1}` }))
    }
    return Effect.succeed([{ type: "flaky_done", data: { after_failures: seen } }])
  }
})

export const Broken = MessageDefinition.event("test.broken.happened").version(1, Schema.Struct({}))
export const broken = Handler.handler(Broken, {
  name: "broken",
  handle: () => Effect.fail(new TransientError({ message: "dependency is down" }))
})

export const Refused = MessageDefinition.event("test.refused.happened").version(1, Schema.Struct({}))
export const refused = Handler.handler(Refused, {
  name: "refused",
  handle: () => Effect.fail(new PermanentError({ message: "this can never succeed" }))
})


export const Blob = MessageDefinition.event("test.blob.stored").version(1, Schema.Struct({ blob: Schema.String }))
export const blobStored = Handler.handler(Blob, {
  name: "blob-stored",
  handle: (m) => Effect.succeed([{ type: "blob_stored", data: { blob: m.payload.blob } }])
})

export const Thrower = MessageDefinition.event("test.thrower.happened").version(1, Schema.Struct({}))
/** Product code that throws instead of failing with a typed error. */
export const thrower = Handler.handler(Thrower, {
  name: "thrower",
  handle: () => {
    throw new TypeError("cannot read properties of undefined")
  }
})

/** A fact whose processor refuses it permanently when `refuse` is set: for per-fact dead-lettering. */
export const Probe = FactDefinition.make("probe", Schema.Struct({ refuse: Schema.Boolean }))
export const probeProcessor = Processor.make(Probe, {
  name: "probe",
  process: (fact) =>
    fact.data.refuse ? Effect.fail(new PermanentError({ message: `probe ${fact.fact_id} refused` })) : Effect.succeed([{ type: "probed", data: { of: fact.fact_id } }])
})

/** Buyers whose charges the `fragile` projection's mapping throws for, until a test "fixes" it by removing them. */
export const fragileBuyers = new Set<string>()

/**
 * A projection with a bug: its mapping of `charge` throws for the buyers in `fragileBuyers`, and maps nothing
 * otherwise. It borrows the `buyer_budgets` table (a projection needs one; it never writes to it), so it must
 * never be rebuilt: the swap would replace buyer_budgets with its empty shadow.
 */
export const fragileProjection = Projection.additive({
  name: "fragile",
  table: Tables.buyerBudgets,
  key: ["buyer_id"],
  queryable: [],
  on: {
    charge: (fact) => {
      if (fragileBuyers.has(String(fact.data.buyer_id))) throw new TypeError("cannot read properties of undefined (reading 'plan')")
      return undefined
    }
  }
})

export const testModule = Module.make("test", {
  handlers: [bumpCounter, flaky, broken, refused, blobStored, thrower],
  processors: [probeProcessor],
  projections: [fragileProjection]
})
