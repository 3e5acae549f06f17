/**
 * Decider snapshots (issue 39) on the real local Durable Object: the counter decider of the test module, and the
 * same decider declaring a snapshot, each deciding commands on a stream of 2,000 imported facts. They decide the
 * same facts; the one with a snapshot writes it in its shard with its first decision and from then on reads only
 * the facts after it (counted at the ledger's `readStreams`, the one RPC per shard a decision makes).
 */
import { env } from "cloudflare:workers"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Result, Schema } from "effect"
import { Handler, Module, PayloadStore, Registry } from "@factline/core"
import { Bindings, Dispatch, KeyRing, Ledger, ModuleLayers, Queues, RetryPolicy } from "@factline/core/runtime"
import { ledger, readStream, unique } from "./helpers.js"
import { Bump, Bumped } from "./TestModule.js"
import { platform } from "./worker.js"

const snapshotCounter = Handler.decider(Bump, {
  name: "bump-counter-snapshot",
  emits: [Bumped],
  initialState: 0,
  evolve: (_n: number, fact) => fact.data.n,
  decide: (m, n) => Effect.succeed([Bumped.make({ n: n + 1, by: m.payload.by })]),
  snapshot: { schema: Schema.Int, version: 1, every: 100 }
})
const withSnapshot = Registry.make([Module.make("counter-snapshots", { handlers: [snapshotCounter] })], { requireEmitters: false })

const command = (subject: string, by: string) => ({
  schema_version: 1, message_type: "test.counter.bump", message_id: unique("msg"), idempotency_key: unique(`bump-${by}`),
  correlation_id: unique("corr"), tenant_id: "tenant-a", subject, source: "test", created_at: new Date().toISOString(), payload: { by }
})

/** Decides `by`'s commands one by one with `registry`; returns the facts each decision read from its shard. */
const decideAll = (registry: Registry.Shape, subject: string, bys: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const live = ledger()
    const read: Array<number> = []
    const counting: Ledger.Ledger["Service"] = {
      ...live,
      readStreams: (keys) => Effect.tap(live.readStreams(keys), (states) => Effect.sync(() => read.push(states.reduce((n, s) => n + s.facts.length, 0))))
    }
    for (const by of bys) {
      const body = command(subject, by)
      const routed = registry.route(body as never, body.payload)
      assert.isTrue(Result.isSuccess(routed))
      const outcomes = yield* Dispatch.dispatch([{ key: "k", value: Result.getOrThrow(routed) }]).pipe(
        Effect.provide(Layer.mergeAll(
          Layer.succeed(Registry.Registry, registry),
          ModuleLayers.ModuleLayers.layer(registry.modules),
          Layer.succeed(Ledger.Ledger, counting),
          Queues.Queues.over((queue) => (env as any)[RetryPolicy.forQueue(queue)!.binding] as Queue),
          PayloadStore.PayloadStore.layer(Bindings.PayloadBucket.make(env.PAYLOADS)),
          KeyRing.KeyRing.over(env.LEDGER, { secretsKey: env.FACTLINE_SECRETS_KEY as string | undefined })
        ))
      )
      assert.isTrue(Result.isSuccess(outcomes.get("k")!))
    }
    return read
  })

/** A stream of `count` imported counter facts. */
const imported = (subject: string, count: number) =>
  Effect.gen(function*() {
    const facts = Array.from({ length: count }, (_, i) => ({
      fact_id: `f_${subject}_${i}`, type: "bumped", data: { n: i + 1, by: "import" },
      causation_id: `import-${subject}`, correlation_id: subject, caused_by: "import", created_at: new Date().toISOString()
    }))
    const [appended] = yield* ledger().append([{ tenant_id: "tenant-a", stream: subject, facts }])
    assert.strictEqual(appended!.status, "appended")
  })

const decided = (subject: string, prior: number) =>
  Effect.promise(() => readStream("tenant-a", subject)).pipe(Effect.map((s) => s.facts.filter((f) => f.sequence > prior).map((f) => [f.sequence, f.data.n, f.data.by])))

describe("decider snapshots", () => {
  it.effect("a decider with a snapshot decides as without one on a long stream, reading only the facts after its snapshot", () =>
    Effect.gen(function*() {
      const prior = 2_000
      const plain = unique("counter")
      const snapshotted = unique("counter")
      yield* imported(plain, prior)
      yield* imported(snapshotted, prior)
      const bys = ["alice", "bob", "carol"]
      const readPlain = yield* decideAll(platform.registry, plain, bys)
      const readSnapshotted = yield* decideAll(withSnapshot, snapshotted, bys)
      // The same decisions: n counts on from the imported facts.
      assert.deepStrictEqual(yield* decided(snapshotted, prior), yield* decided(plain, prior))
      assert.deepStrictEqual((yield* decided(snapshotted, prior)).map(([seq, n]) => [seq, n]), [[2001, 2001], [2002, 2002], [2003, 2003]])
      // Without a snapshot every decision reads the whole stream; with one, the first reads it all and stores the
      // state at 2,001 in the shard, the next ones read only the facts after it.
      assert.deepStrictEqual(readPlain, [2000, 2001, 2002])
      assert.deepStrictEqual(readSnapshotted, [2000, 0, 1])
      const stored = yield* ledger().readStreams([{
        tenant_id: "tenant-a", stream: snapshotted,
        snapshots: [{ decider: snapshotCounter.name, version: 1, fingerprint: snapshotCounter.snapshot!.fingerprint }]
      }])
      assert.deepStrictEqual(stored[0]!.snapshots?.map((s) => [s.sequence, s.state]), [[2001, "2001"]])
      // Another snapshot version is never answered.
      const other = yield* ledger().readStreams([{ tenant_id: "tenant-a", stream: snapshotted, snapshots: [{ decider: snapshotCounter.name, version: 2, fingerprint: "v2" }] }])
      assert.deepStrictEqual([other[0]!.snapshots, other[0]!.facts.length], [[], 2003])
    }), 120_000)
})
