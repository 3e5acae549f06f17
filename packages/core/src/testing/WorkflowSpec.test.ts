import { describe, expect, it } from "vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Activity from "effect/workflow/Activity"
import * as DurableClock from "effect/workflow/DurableClock"
import * as EffectWorkflow from "effect/workflow/Workflow"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Workflow from "../definitions/Workflow.js"
import { PermanentError, TransientError } from "../failures/Failure.js"
import { fact } from "./Builders.js"
import { SpecError } from "./SpecError.js"
import { WorkflowSpec } from "./WorkflowSpec.js"

const Signed = FactDefinition.make("order_signed", Schema.Struct({ order_id: Schema.String, ship: Schema.Boolean }))
const Cancelled = FactDefinition.make("order_cancelled", Schema.Struct({ order_id: Schema.String }))
const Shipped = FactDefinition.make("order_shipped", Schema.Struct({ order_id: Schema.String, parcel: Schema.String, at: Schema.String }))
const Abandoned = FactDefinition.make("order_abandoned", Schema.Struct({ order_id: Schema.String, why: Schema.String }))

/** A carrier outside: books a parcel (deduplicated by idempotency key, as a real API does) and cancels one. */
class Carrier extends Context.Service<Carrier, {
  readonly book: (order: string, key: string) => Effect.Effect<string, TransientError | PermanentError>
  readonly cancel: (parcel: string, key: string) => Effect.Effect<void>
}>()("test/Carrier") {}

const fakeCarrier = (options: { readonly busy?: number; readonly refuse?: boolean } = {}) => {
  const booked = new Map<string, string>()
  let busy = options.busy ?? 0
  const effects: Array<string> = []
  const layer = Layer.succeed(Carrier, Carrier.of({
    book: (order, key) =>
      Effect.suspend((): Effect.Effect<string, TransientError | PermanentError> => {
        if (busy > 0) return (busy--, Effect.fail(new TransientError({ message: "carrier busy" })))
        if (options.refuse === true) return Effect.fail(new PermanentError({ message: `carrier refuses order ${order}` }))
        const known = booked.get(key)
        if (known !== undefined) return Effect.succeed(known)
        const parcel = `p-${booked.size + 1}`
        booked.set(key, parcel)
        effects.push(`book ${order}`)
        return Effect.succeed(parcel)
      }),
    cancel: (parcel, key) => Effect.sync(() => void (booked.has(`cancel:${key}`) || (booked.set(`cancel:${key}`, parcel), effects.push(`cancel ${parcel}`))))
  }))
  return { layer, effects }
}

const book = (order: string) =>
  Activity.make({
    name: "book",
    success: Schema.String,
    error: Workflow.StepError,
    execute: Effect.flatMap(Activity.idempotencyKey("book"), (key) => Effect.flatMap(Effect.service(Carrier), (c) => c.book(order, key)))
  })

const ship = Workflow.make({
  name: "ship",
  start: Signed,
  when: (f) => f.data.ship,
  emits: [Shipped, Abandoned],
  waitsFor: { cancel: [Cancelled] },
  retry: { limit: 2, delay: "1 minute", backoff: "exponential" },
  run: (signed, wf) =>
    Effect.gen(function*() {
      const { order_id } = signed.data
      const parcel = yield* book(order_id).pipe(
        EffectWorkflow.withCompensation((p) =>
          Activity.make({ name: "cancel-parcel", execute: Effect.flatMap(Activity.idempotencyKey("cancel-parcel"), (key) => Effect.flatMap(Effect.service(Carrier), (c) => c.cancel(p, key))) })),
        Effect.tapError((error) => wf.append("refused", [Abandoned.make({ order_id, why: error.message })]))
      )
      yield* DurableClock.sleep({ name: "cool-off", duration: "2 days" })
      const cancelled = yield* wf.waitFor("cancel", { timeout: "1 day" })
      if (Option.isSome(cancelled)) return yield* Effect.fail(new PermanentError({ message: "cancelled by the buyer" }))
      const at = yield* Activity.make({ name: "now", success: Schema.String, execute: Effect.map(Effect.clockWith((c) => c.currentTimeMillis), (ms) => new Date(ms).toISOString()) })
      yield* wf.append("shipped", [Shipped.make({ order_id, parcel, at })])
    })
})

const signed = (ship = true) => fact(Signed, { order_id: "o1", ship }, { stream: "o1", createdAt: "2026-03-01T00:00:00.000Z" })

describe("WorkflowSpec", () => {
  it("runs the body: steps in order, facts appended, sleeps and waits with their durations, on a clock moved by them", async () => {
    const carrier = fakeCarrier()
    await WorkflowSpec.for(ship, { layer: carrier.layer }).when(signed()).then({
      steps: ["book", "sleep/cool-off", "wait/cancel", "now", "append/shipped"],
      // 2 days of sleep and a day's wait that timed out: the clock moved three days on from the start fact.
      facts: [Shipped.make({ order_id: "o1", parcel: "p-1", at: "2026-03-04T00:00:00.000Z" })],
      sleeps: [{ name: "cool-off", duration: "48 hours" }],
      waits: [{ name: "cancel", answer: "timeout", timeout: "1 day" }],
      compensations: []
    })
    // The run, its replay and the redelivered attempt of each step: booked once by key.
    expect(carrier.effects).toEqual(["book o1"])
    const wrong = WorkflowSpec.for(ship, { layer: fakeCarrier().layer }).when(signed()).then({ steps: ["book", "append/shipped"] })
    await expect(wrong).rejects.toBeInstanceOf(SpecError)
    await expect(wrong).rejects.toThrow("workflow ship ran other steps than expected")
  })

  it("a fact delivered to a wait answers it; the failure then compensates the completed steps once", async () => {
    const carrier = fakeCarrier()
    await WorkflowSpec.for(ship, { layer: carrier.layer }).when(signed()).delivering("cancel", Cancelled.make({ order_id: "o1" })).thenFails("cancelled by the buyer", {
      steps: ["book", "sleep/cool-off", "wait/cancel", "cancel-parcel"],
      compensations: ["cancel-parcel"],
      waits: [{ name: "cancel", answer: "order_cancelled" }],
      facts: []
    })
    expect(carrier.effects).toEqual(["book o1", "cancel p-1"])
  })

  it("a permanent failure of a step is handed to the body (here: a fact appended, then the failure); a transient one is retried with the policy's delays", async () => {
    await WorkflowSpec.for(ship, { layer: fakeCarrier({ refuse: true }).layer }).when(signed()).thenFails("carrier refuses order o1", {
      steps: ["book", "append/refused"],
      facts: [Abandoned.make({ order_id: "o1", why: "carrier refuses order o1" })],
      compensations: []
    })
    const { attempts, facts } = await WorkflowSpec.for(ship, { layer: fakeCarrier({ busy: 2 }).layer }).when(signed()).result()
    expect(attempts.book).toBe(3)
    // Retries after 1 and 2 minutes, then 2 days and 1 day.
    expect(facts.map((f) => f.data.at)).toEqual(["2026-03-04T00:03:00.000Z"])
    await WorkflowSpec.for(ship, { layer: fakeCarrier({ busy: 3 }).layer }).when(signed()).thenFails(/step book failed after 3 attempts: .*carrier busy/, { steps: ["book"] })
  })

  it("the facts its ids are the runtime's (instance, step, position) and the fact the workflow does not start for is not started", async () => {
    const first = await WorkflowSpec.for(ship, { layer: fakeCarrier().layer }).when(signed()).result()
    const second = await WorkflowSpec.for(ship, { layer: fakeCarrier().layer }).when(signed()).result()
    expect(first.instanceId).toMatch(/^ship-[0-9a-f]{32}$/)
    expect(first.facts.map((f) => f.fact_id)).toEqual(second.facts.map((f) => f.fact_id))
    expect(first.facts.map((f) => [f.caused_by, f.stream])).toEqual([["ship", "o1"]])
    await WorkflowSpec.for(ship, { layer: fakeCarrier().layer }).when(signed(false)).thenNotStarted()
    await expect(WorkflowSpec.for(ship, { layer: fakeCarrier().layer }).when(signed(false)).then()).rejects.toThrow("does not start it")
  })

  it("a short sleep (run in memory by effect/workflow, inside its step) is a sleep too, and moves the clock on", async () => {
    const brief = Workflow.make({
      name: "brief",
      start: Signed,
      emits: [Shipped],
      run: (s, wf) =>
        Effect.gen(function*() {
          yield* DurableClock.sleep({ name: "pause", duration: "30 seconds" })
          const at = yield* Activity.make({ name: "now", success: Schema.String, execute: Effect.map(Effect.clockWith((c) => c.currentTimeMillis), (ms) => new Date(ms).toISOString()) })
          yield* wf.append("shipped", [Shipped.make({ order_id: s.data.order_id, parcel: "-", at })])
        })
    })
    await WorkflowSpec.for(brief).when(signed()).then({
      steps: ["sleep/pause", "now", "append/shipped"],
      sleeps: [{ name: "pause", duration: "30 seconds" }],
      facts: [Shipped.make({ order_id: "o1", parcel: "-", at: "2026-03-01T00:00:30.000Z" })]
    })
  })

  it("refuses a delivery to a wait it does not have, or of a type the wait does not take", async () => {
    await expect(WorkflowSpec.for(ship, { layer: fakeCarrier().layer }).when(signed()).delivering("refund", Cancelled.make({ order_id: "o1" })).then()).rejects.toThrow("has no wait named refund")
    await expect(WorkflowSpec.for(ship, { layer: fakeCarrier().layer }).when(signed()).delivering("cancel", Abandoned.make({ order_id: "o1", why: "x" })).then()).rejects.toThrow("waits for order_cancelled, not order_abandoned")
  })

  describe("checks idempotency by itself", () => {
    it("fails a step whose external call carries a new key on each attempt, naming the step", async () => {
      let n = 0
      const careless = Workflow.make({
        name: "careless",
        start: Signed,
        run: (s) => Activity.make({ name: "book", success: Schema.String, error: Workflow.StepError, execute: Effect.flatMap(Effect.service(Carrier), (c) => c.book(s.data.order_id, `key-${++n}`)) })
      })
      await expect(WorkflowSpec.for(careless, { layer: fakeCarrier().layer }).when(signed()).then()).rejects.toThrow(
        "workflow careless: step book is not idempotent: attempted again, it made other service calls than the attempt that succeeded"
      )
    })

    it("fails a body that calls a service outside a step (it would call it again on every replay)", async () => {
      const outside = Workflow.make({
        name: "outside",
        start: Signed,
        run: (s) => Effect.flatMap(Effect.service(Carrier), (c) => Effect.ignore(c.book(s.data.order_id, "k")))
      })
      await expect(WorkflowSpec.for(outside, { layer: fakeCarrier().layer }).when(signed()).then()).rejects.toThrow('workflow outside calls Carrier.book(["o1","k"]) outside any step')
    })

    it("fails a body that takes another path on replay", async () => {
      let runs = 0
      const drifting = Workflow.make({
        name: "drifting",
        start: Signed,
        run: () => Effect.suspend(() => Activity.make({ name: runs++ === 0 ? "first" : "second", execute: Effect.void }))
      })
      await expect(WorkflowSpec.for(drifting).when(signed()).then()).rejects.toThrow("workflow drifting is not deterministic: replaying it (as Cloudflare does after a restart or a wake) ran step second again")
    })
  })
})
