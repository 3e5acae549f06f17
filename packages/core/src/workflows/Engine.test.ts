import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Activity from "effect/workflow/Activity"
import * as DurableClock from "effect/workflow/DurableClock"
import * as EffectWorkflow from "effect/workflow/Workflow"
import { FactDefinition, PermanentError, TransientError } from "../index.js"
import * as Workflow from "../definitions/Workflow.js"
import * as Engine from "./Engine.js"

const Started = FactDefinition.make("thing_started", Schema.Struct({ id: Schema.String }))
const Done = FactDefinition.make("thing_done", Schema.Struct({ id: Schema.String }))

/** Cloudflare's step semantics in memory: a completed step's result is kept across replays; retries up to the limit. */
const memoryStep = () => {
  const kept = new Map<string, unknown>()
  const calls: Array<string> = []
  const step: Engine.Step = {
    do: async (name, config, callback) => {
      if (kept.has(name)) return kept.get(name) as never
      let last: unknown
      for (let i = 0; i <= config.retries.limit; i++) {
        calls.push(name)
        try {
          const value = await callback()
          kept.set(name, value)
          return value
        } catch (error) {
          last = error
        }
      }
      throw last
    },
    sleep: async (name) => void calls.push(`sleep:${name}`),
    waitForEvent: async () => {
      throw new Error("timed out")
    }
  }
  return { step, kept, calls }
}

const steps = (appended: Array<string>): Workflow.Steps => ({
  instanceId: "i-1",
  tenantId: "t",
  stream: "s",
  append: (step, facts) => Effect.sync(() => (appended.push(`${step}:${facts.map((f) => f.type).join(",")}`), ["f_1"])),
  waitFor: () => Effect.succeed(Option.none()),
  emit: () => Effect.void
})

const fact = { fact_id: "f_0", tenant_id: "t", stream: "s", sequence: 1, type: "thing_started", data: { id: "x" }, causation_id: null, correlation_id: "c", created_at: "2026-11-28T00:00:00.000Z" } as any

describe("Engine", () => {
  it.effect("runs each activity once across replays, sleeps by the step store, appends by the handle", () =>
    Effect.gen(function*() {
      let effects = 0
      const definition = Workflow.make({
        name: "things",
        start: Started,
        emits: [Done],
        run: (started, wf) =>
          Effect.gen(function*() {
            const key = yield* Activity.make({ name: "call", success: Schema.String, execute: Effect.flatMap(Activity.idempotencyKey("call"), (k) => Effect.sync(() => (effects++, k))) })
            yield* DurableClock.sleep({ name: "pause", duration: "2 hours" })
            yield* wf.append("record", [Done.make({ id: started.data.id })])
            return key
          })
      })
      const memory = memoryStep()
      const appended: Array<string> = []
      const first = yield* Engine.run(definition, fact, { instanceId: "i-1", step: memory.step, steps: steps(appended) })
      const again = yield* Engine.run(definition, fact, { instanceId: "i-1", step: memory.step, steps: steps(appended) })
      expect(first).toEqual({ _tag: "Completed" })
      expect(again).toEqual({ _tag: "Completed" })
      expect(effects).toBe(1)
      expect(memory.calls).toEqual(["call", "sleep:pause", "sleep:pause"])
      expect(typeof memory.kept.get("call")).toBe("object")
    }))

  it.effect("retries a transient failure, keeps a permanent one, and compensates completed steps once when the body fails", () =>
    Effect.gen(function*() {
      let attempts = 0
      const undone: Array<string> = []
      const definition = Workflow.make({
        name: "saga",
        start: Started,
        retry: { limit: 3 },
        run: () =>
          Effect.gen(function*() {
            yield* Activity.make({
              name: "create",
              success: Schema.String,
              error: TransientError,
              execute: Effect.suspend(() => ++attempts < 3 ? Effect.fail(new TransientError({ message: "busy" })) : Effect.succeed("c-1"))
            }).pipe(EffectWorkflow.withCompensation((id) => Activity.make({ name: "undo-create", execute: Effect.sync(() => void undone.push(id)) })))
            yield* Activity.make({ name: "deal", error: PermanentError, execute: Effect.fail(new PermanentError({ message: "refused" })) })
          })
      })
      const memory = memoryStep()
      const outcome = yield* Engine.run(definition, fact, { instanceId: "i-2", step: memory.step, steps: steps([]) })
      expect(outcome._tag).toBe("Failed")
      expect(outcome._tag === "Failed" && outcome.message).toContain("refused")
      expect(attempts).toBe(3)
      expect(undone).toEqual(["c-1"])
      // A replay (a restart) answers every step from the store: nothing runs twice.
      const replay = yield* Engine.run(definition, fact, { instanceId: "i-2", step: memory.step, steps: steps([]) })
      expect(replay._tag).toBe("Failed")
      expect(undone).toEqual(["c-1"])
      expect(memory.calls.filter((c) => c === "deal")).toHaveLength(1)
    }))

  it.effect("a step result over Cloudflare's 1 MiB fails the body once, naming the step and what to do; a sleep over 365 days too", () =>
    Effect.gen(function*() {
      let calls = 0
      const big = Workflow.make({
        name: "big",
        start: Started,
        run: () => Activity.make({ name: "load", success: Schema.String, execute: Effect.sync(() => (calls++, "x".repeat(Engine.maxStepResultBytes))) })
      })
      const outcome = yield* Engine.run(big, fact, { instanceId: "i-3", step: memoryStep().step, steps: steps([]) })
      expect(outcome._tag).toBe("Failed")
      expect(outcome._tag === "Failed" && outcome.message).toContain("step load returned 1048598 bytes, over Cloudflare Workflows' 1048576 bytes per step: store the data in R2")
      expect(calls).toBe(1)
      const long = Workflow.make({ name: "long", start: Started, run: () => DurableClock.sleep({ name: "nap", duration: "400 days" }) })
      const slept = yield* Engine.run(long, fact, { instanceId: "i-4", step: memoryStep().step, steps: steps([]) })
      expect(slept._tag === "Failed" && slept.message).toContain("longer than Cloudflare Workflows' longest sleep (365 days)")
    }))
})
