import { Context, Effect, Layer, Result, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Module from "../definitions/Module.js"
import * as Processor from "../definitions/Processor.js"
import { Ledger } from "../ledger/Ledger.js"
import * as ProcessingConsumer from "../processing/ProcessingConsumer.js"
import { fact } from "../testing/Builders.js"
import * as TestPlatform from "../testing/TestPlatform.js"

class Counter extends Context.Service<Counter, { readonly label: string }>()("test/Counter") {}

const Ping = FactDefinition.make("ping", Schema.Struct({ n: Schema.Int }))
const Pong = FactDefinition.make("pong", Schema.Struct({ n: Schema.Int, label: Schema.String }))
const pong = Processor.make(Ping, {
  name: "pong",
  emits: [Pong],
  process: (f) => Effect.map(Effect.service(Counter), (counter) => [Pong.make({ n: f.data.n, label: counter.label })])
})
const Other = FactDefinition.make("other", Schema.Struct({ n: Schema.Int }))
const plain = Processor.make(Other, { name: "plain", emits: [Ping], process: (f) => Effect.succeed([Ping.make({ n: f.data.n })]) })

describe("module layers", () => {
  it("a module's layer is built once per runtime, not per message, and its services reach its processor", async () => {
    let builds = 0
    const layer = Layer.effect(Counter, Effect.sync(() => Counter.of({ label: `build-${++builds}` })))
    const platform = TestPlatform.make([Module.make("pings", { processors: [pong], layer })], { requireEmitters: false })
    for (const n of [1, 2, 3]) {
      const parent = fact(Ping, { n }, { stream: `s-${n}` })
      const outcomes = await platform.run(ProcessingConsumer.process([{ key: "k", value: { fact: parent } }]))
      expect(Result.isSuccess(outcomes.get("k")!)).toBe(true)
      const stream = await platform.run(Effect.flatMap(Effect.service(Ledger), (ledger) => ledger.read({ tenant_id: parent.tenant_id, stream: parent.stream })))
      expect(stream.facts.filter((f) => f.type === "pong").map((f) => f.data)).toEqual([{ n, label: "build-1" }])
    }
    expect(builds).toBe(1)
  })

  it("a module whose layer fails to build fails only its own code: another module's processor runs", async () => {
    const broken = Layer.effect(Counter, Effect.die(new Error("no config")))
    const platform = TestPlatform.make(
      [Module.make("pings", { processors: [pong], layer: broken }), Module.make("others", { processors: [plain] })],
      { requireEmitters: false }
    )
    const ping = fact(Ping, { n: 1 }, { stream: "p" })
    const other = fact(Other, { n: 2 }, { stream: "o" })
    const outcomes = await platform.run(ProcessingConsumer.process([{ key: "ping", value: { fact: ping } }, { key: "other", value: { fact: other } }]))
    const failed = outcomes.get("ping")!
    expect(Result.isFailure(failed) && { retryable: failed.failure.retryable, message: failed.failure.message }).toEqual({
      retryable: false,
      message: "module pings: its layer failed to build (Error: no config); its handlers and processors fail until a deploy fixes it"
    })
    expect(Result.isSuccess(outcomes.get("other")!)).toBe(true)
  })
})
