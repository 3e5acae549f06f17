import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Result } from "effect"
import { PayloadStore, Registry } from "@factline/core"
import { Bindings, Dispatch, KeyRing, Ledger, LedgerTopology, ModuleLayers, Queues, RetryPolicy, Sql } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { deadMessages, eventually, ledger, readStream, shardKeyOf, unique } from "./helpers.js"
import { platform } from "./worker.js"

const bump = (subject: string, by: string) => ({
  schema_version: 1,
  message_type: "test.counter.bump",
  message_id: unique("msg"),
  idempotency_key: unique(`bump-${by}`),
  correlation_id: unique("corr"),
  tenant_id: "tenant-a",
  subject,
  source: "test",
  created_at: new Date().toISOString(),
  payload: { by }
})

const deliver = (bodies: ReadonlyArray<unknown>) =>
  Effect.promise(async () => {
    const batch = createMessageBatch("factline-events", bodies.map((body) => ({ id: unique("qm"), timestamp: new Date(), attempts: 1, body })))
    const ctx = createExecutionContext()
    await platform.queue(batch, env as unknown as PlatformEnv, ctx)
    return getQueueResult(batch, ctx)
  })

const counted = (subject: string) =>
  Effect.promise(() => readStream("tenant-a", subject)).pipe(Effect.map((s) => s.facts.map((f) => [f.sequence, f.data.n, f.data.by])))

describe("deciders", () => {
  it.effect("a decision depends on the facts already in its stream", () =>
    Effect.gen(function*() {
      const subject = unique("counter")
      const first = bump(subject, "alice")
      yield* deliver([first])
      yield* deliver([bump(subject, "bob")])
      // Two commands in one batch: the second decides against the first one's facts.
      yield* deliver([bump(subject, "carol"), bump(subject, "dave")])
      assert.deepStrictEqual(yield* counted(subject), [[1, 1, "alice"], [2, 2, "bob"], [3, 3, "carol"], [4, 4, "dave"]])
      // Re-delivering an already decided command decides nothing new, even though the state moved on.
      const again = yield* deliver([{ ...first, message_id: unique("msg") }])
      assert.strictEqual(again.explicitAcks.length, 1)
      assert.strictEqual((yield* counted(subject)).length, 4)
    }))

  it.effect("a command its key's binding refuses writes nothing; the next command of its stream decides without it", () =>
    Effect.gen(function*() {
      const subject = unique("counter")
      const taken = bump(unique("counter"), "zed")
      yield* deliver([taken])
      // Alice's key is bound to zed's payload. The batch is decided while its keys are claimed, so bob first decides
      // after alice's bump (n = 2); once the claim refuses alice, bob's append meets the stream at version 0 and bob
      // decides again against what is stored.
      const refused = { ...bump(subject, "alice"), idempotency_key: taken.idempotency_key }
      const result = yield* deliver([refused, bump(subject, "bob")])
      assert.deepStrictEqual(result.retryMessages, [])
      assert.deepStrictEqual(yield* counted(subject), [[1, 1, "bob"]])
      const rows = yield* Effect.promise(() => eventually(async () => {
        const found = await deadMessages(taken.idempotency_key)
        return found.length > 0 ? found : undefined
      }, 30_000, "alice's dead letter"))
      assert.strictEqual(rows.length, 1)
      assert.strictEqual(rows[0]!.reason, "idempotency_conflict")
      assert.strictEqual(JSON.parse(rows[0]!.original_message).message_id, refused.message_id)
    }))

  it.effect("two concurrent decisions on one stream both apply against the latest state", () =>
    Effect.gen(function*() {
      const subject = unique("counter")
      const live = Ledger.make(env.LEDGER, LedgerTopology.make(Sql.make("platform", env.DB)))
      // Hold both first reads until both have read version 0, so the two decisions race for real.
      let reads = 0
      let release!: () => void
      const bothRead = new Promise<void>((resolve) => (release = resolve))
      const racing: Ledger.Ledger["Service"] = {
        ...live,
        readStreams: (keys) =>
          Effect.flatMap(live.readStreams(keys), (states) =>
            Effect.promise(async () => {
              reads++
              if (reads === 2) release()
              if (reads <= 2) await bothRead
              return states
            }))
      }
      const route = (body: ReturnType<typeof bump>) => {
        const routed = platform.registry.route(body as never, body.payload)
        assert.isTrue(Result.isSuccess(routed))
        return { key: body.idempotency_key, value: Result.getOrThrow(routed) }
      }
      const a = route(bump(subject, "alice"))
      const b = route(bump(subject, "bob"))
      const [outA, outB] = yield* Effect.all([Dispatch.dispatch([a]), Dispatch.dispatch([b])], { concurrency: 2 }).pipe(
        Effect.provide(Layer.mergeAll(
          Layer.succeed(Registry.Registry, platform.registry),
          ModuleLayers.ModuleLayers.layer(platform.registry.modules),
          Layer.succeed(Ledger.Ledger, racing),
          Queues.Queues.over((queue) => (env as any)[RetryPolicy.forQueue(queue)!.binding] as Queue),
          PayloadStore.PayloadStore.layer(Bindings.PayloadBucket.make(env.PAYLOADS)),
          KeyRing.KeyRing.over(env.LEDGER, { secretsKey: env.FACTLINE_SECRETS_KEY as string | undefined })
        ))
      )
      assert.isTrue(Result.isSuccess(outA.get(a.key)!))
      assert.isTrue(Result.isSuccess(outB.get(b.key)!))
      // Two first reads, plus one re-read by the decision that lost the race.
      assert.strictEqual(reads, 3)
      const facts = yield* counted(subject)
      assert.deepStrictEqual(facts.map(([seq, n]) => [seq, n]), [[1, 1], [2, 2]])
      assert.sameMembers(facts.map(([, , by]) => by), ["alice", "bob"])
    }))

  it.effect("streams that share a shard are decided apart: a decider folds only its own stream", () =>
    Effect.gen(function*() {
      // Two subjects that hash to the same shard of tenant-a.
      const first = unique("counter")
      yield* deliver([bump(first, "seed")])
      const shardOfFirst = yield* Effect.promise(() => shardKeyOf("tenant-a", first))
      let second = unique("counter")
      while ((yield* Effect.promise(() => shardKeyOf("tenant-a", second))) !== shardOfFirst) second = unique("counter")
      yield* deliver([bump(first, "alice"), bump(second, "bob"), bump(first, "carol")])
      assert.deepStrictEqual((yield* counted(first)).map(([seq, n]) => [seq, n]), [[1, 1], [2, 2], [3, 3]])
      assert.deepStrictEqual(yield* counted(second), [[1, 1, "bob"]])
    }))

  it.effect("a decider folds its whole stream, however long (read page by page past 10,000 facts)", () =>
    Effect.gen(function*() {
      const subject = unique("counter")
      const prior = 10_050
      const facts = Array.from({ length: prior }, (_, i) => ({
        fact_id: `f_${subject}_${i}`, type: "bumped", data: { n: i + 1, by: "import" },
        causation_id: `import-${subject}`, correlation_id: subject, caused_by: "import", created_at: new Date().toISOString()
      }))
      const [appended] = yield* ledger().append([{ tenant_id: "tenant-a", stream: subject, facts }])
      assert.strictEqual(appended!.status, "appended")
      yield* deliver([bump(subject, "late")])
      const state = yield* ledger().read({ tenant_id: "tenant-a", stream: subject }, { after: prior })
      assert.deepStrictEqual(state.facts.map((f) => [f.sequence, f.data.n, f.data.by]), [[prior + 1, prior + 1, "late"]])
    }), 120_000)
})
