/**
 * `npm run -s bench:snapshots`: what a decision costs on a long stream, with and without a decider snapshot
 * (issue 39's target: on a 10,000-fact stream at most 2× a 10-fact stream, with a snapshot). In plain Node on
 * the in-memory platform (TestPlatform: the real dispatch, the real ledger SQL over node:sqlite, queues that
 * record): the figures are the framework's own work per decision — the shard's read, the rows decoded, the
 * fold, the decision, the append — which is what grows with the stream; a Durable Object's RPC round trip
 * adds the same constant to both sides of the ratio. For each stream length (BENCH_SNAPSHOT_LENGTHS, default
 * 10,10000) and each decider (the counter without a snapshot, and with `snapshot: { every: 100 }`), it imports
 * the stream's facts, decides once to warm up (the snapshotting decider writes its first snapshot there),
 * then times BENCH_SNAPSHOT_DECISIONS (default 200: two snapshot cycles) single-command decisions and prints
 * the mean per decision and the ratios. Results → bench/out/results/results-snapshots.json (ignored by git).
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { Effect, Result, Schema } from "effect"
import { FactDefinition, Handler, MessageDefinition, Module } from "@factline/core"
import { Dispatch, Ledger } from "@factline/core/runtime"
import * as TestPlatform from "../packages/core/src/testing/TestPlatform.js"
import { message } from "../packages/core/src/testing/Builders.js"

const lengths = (process.env.BENCH_SNAPSHOT_LENGTHS ?? "10,10000").split(",").map(Number)
const decisions = Number(process.env.BENCH_SNAPSHOT_DECISIONS ?? "200")
const tenant = "tenant-bench"

const Bump = MessageDefinition.command("bench.counter.bump").version(1, Schema.Struct({ by: Schema.String }))
const Bumped = FactDefinition.make("bench_bumped", Schema.Struct({ n: Schema.Int, by: Schema.String }))
const counter = (snapshot: boolean) =>
  Handler.decider(Bump, {
    name: snapshot ? "counter-snapshot" : "counter",
    emits: [Bumped],
    initialState: 0,
    evolve: (_n: number, fact) => fact.data.n,
    decide: (m, n) => Effect.succeed([Bumped.make({ n: n + 1, by: m.payload.by })]),
    ...(snapshot ? { snapshot: { schema: Schema.Int, version: 1, every: 100 } } : {})
  })

const measure = async (length: number, snapshot: boolean) => {
  const platform = TestPlatform.make([Module.make("bench", { handlers: [counter(snapshot)] })], { shardsPerTenant: 1 })
  const stream = `stream-${length}`
  const facts = Array.from({ length }, (_, i) => ({
    fact_id: `import-${i}`, type: "bench_bumped", data: { n: i + 1, by: "import" },
    causation_id: "import", correlation_id: "import", caused_by: "import", created_at: new Date(0).toISOString()
  }))
  await platform.run(Effect.gen(function*() {
    return yield* (yield* Ledger.Ledger).append([{ tenant_id: tenant, stream, facts }])
  }))
  let n = 0
  const decideOne = async () => {
    const m = message(Bump, { by: "bench" }, { subject: stream, tenant, idempotencyKey: `bump-${length}-${n++}` })
    const routed = platform.registry.route(m, m.payload)
    if (Result.isFailure(routed)) throw new Error("not routed")
    await platform.run(Dispatch.dispatch([{ key: "k", value: routed.success }]))
  }
  await decideOne()
  const started = performance.now()
  for (let i = 0; i < decisions; i++) await decideOne()
  return (performance.now() - started) / decisions
}

const rows: Array<{ length: number; without_ms: number; with_ms: number }> = []
for (const length of lengths) rows.push({ length, without_ms: await measure(length, false), with_ms: await measure(length, true) })

const fmt = (x: number) => x.toFixed(3).padStart(9)
console.log(`decision cost per command (mean of ${decisions}, in-memory platform, ms)`)
console.log(`${"stream".padStart(8)} ${"without".padStart(9)} ${"with".padStart(9)}`)
for (const r of rows) console.log(`${String(r.length).padStart(8)} ${fmt(r.without_ms)} ${fmt(r.with_ms)}`)
const shortest = rows[0]!
const longest = rows.at(-1)!
const ratios = { without: longest.without_ms / shortest.without_ms, with: longest.with_ms / shortest.with_ms }
console.log(`ratio ${longest.length} / ${shortest.length} facts: without a snapshot x${ratios.without.toFixed(2)}, with a snapshot x${ratios.with.toFixed(2)} (target: at most x2 with)`)
mkdirSync(new URL("./out/results/", import.meta.url), { recursive: true })
writeFileSync(new URL("./out/results/results-snapshots.json", import.meta.url), JSON.stringify({ decisions, rows, ratios, at: new Date().toISOString() }, null, 2))
