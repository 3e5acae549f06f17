/**
 * The specification of a workflow, in plain Node: its body runs on the in-memory platform (TestPlatform) through
 * the runtime's own invocation (`workflows/Runner.ts`: the same append, wait and emit steps, the same fact ids,
 * the same instance id and `workflow_instances` row), on an in-memory step store with Cloudflare's semantics
 * (MemoryStep). Time is a `TestClock` set to the start fact's `created_at`: a sleep, a wait that times out and a
 * retry's delay move it on, so what the workflow appends after `sleep("2 days")` is stamped two days later.
 *
 * ```ts
 * await WorkflowSpec.for(crmSync, { layer: FakeCrm })
 *   .when(fact(Qualification, { call_id: "c1", qualified: true }, { stream: "c1" }))
 *   .delivering("dispute", fact(Refund, money, { stream: "c1" }))   // without it, the wait times out
 *   .then({ steps: ["create-contact", "create-deal", "wait/dispute", "attach-note", "append/synced"], facts: [CrmSynced.make({ … })] })
 * await WorkflowSpec.for(crmSync, { layer: RefusingCrm }).when(qualified).thenFails("refuses", { compensations: ["delete-contact"] })
 * ```
 *
 * Every spec also checks what Cloudflare's engine requires of a body, by itself:
 *
 * - **replay**: the body is run again from the top on the same step store, as Cloudflare runs it after a
 *   restart or a wake; the spec fails if that runs any step again or a new one (the body decided something
 *   outside a step), calls a service of the module's layer (outside a step: it would happen on every
 *   replay), appends a fact or emits a message;
 * - **redelivery**: each step that succeeded is attempted once more (an attempt whose answer was lost is run
 *   again); the spec fails if that attempt calls a service with other arguments than the attempt that
 *   succeeded (an external call must carry the same idempotency key every time: `Activity.idempotencyKey`),
 *   appends another fact or emits a message under a new idempotency key.
 *
 * Service calls are seen by wrapping the services of the layer given (or the module's): each method call (each
 * run of its Effect) is recorded with the step that made it. Steps run one at a time (a body that runs steps
 * concurrently may see a call attributed to another running step).
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as TestClock from "effect/testing/TestClock"
import type { Fact } from "@factline/schemas"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import type { NewFact } from "../definitions/FactDefinition.js"
import * as Module from "../definitions/Module.js"
import type * as Workflow from "../definitions/Workflow.js"
import * as FactId from "../ledger/FactId.js"
import * as Engine from "../workflows/Engine.js"
import { eventType, instanceId, type Params } from "../workflows/Instances.js"
import * as Runner from "../workflows/Runner.js"
import { WorkflowRecords } from "../workflows/WorkflowRecords.js"
import { MemoryStep } from "./MemoryStep.js"
import { noted, recording, type Seen, type ServiceCall } from "./ServiceCalls.js"
import { json, matches, same, SpecError } from "./SpecError.js"
import { appendGiven, type LayerOptions, readStream } from "./Specs.js"
import * as TestPlatform from "./TestPlatform.js"
import { check, type Expected, type WorkflowResult } from "./WorkflowResult.js"

export type { Expected, Outcome, WorkflowResult } from "./WorkflowResult.js"
export type { ServiceCall } from "./ServiceCalls.js"

/** The runtime's own steps around a body (reading a large start fact, recording a failed instance's dead letter): not the workflow's. */
const runtimeSteps = new Set(Runner.runtimeSteps)

/** The step of a `DurableClock.sleep` short enough for `effect/workflow` to run in memory. */
const inMemorySleep = "DurableClock/"

type Delivered = NewFact<string, unknown> | Fact
const isStored = (f: Delivered): f is Fact => "fact_id" in f

class WorkflowRun {
  private outcome: Promise<WorkflowResult> | undefined
  private readonly what: string
  constructor(
    private readonly workflow: Workflow.Any,
    private readonly layer: Module.AnyLayer | undefined,
    private readonly start: Fact,
    private readonly deliveries: ReadonlyMap<string, Delivered>
  ) {
    this.what = `workflow ${workflow.name}`
  }

  /**
   * The fact its wait `name` receives (a fact of one of the types `waitsFor[name]` lists: `fact(Refund, …)` or
   * `Refund.make(…)`, put on the start fact's stream); a wait with none delivered times out.
   */
  delivering(name: string, fact: Delivered): WorkflowRun {
    return new WorkflowRun(this.workflow, this.layer, this.start, new Map([...this.deliveries, [name, fact]]))
  }

  /** The run, replayed and redelivered, for assertions of your own. */
  result(): Promise<WorkflowResult> {
    return (this.outcome ??= this.execute())
  }

  /** Expects the instance to complete, and what it did (each field given). */
  then(expected: Expected = {}): Promise<void> {
    return this.result().then((result) => {
      const { outcome } = result
      if (outcome._tag === "NotStarted") throw new SpecError(`expected ${this.what} to complete, but the fact does not start it (its when is false)`)
      if (outcome._tag !== "Completed") throw new SpecError(`expected ${this.what} to complete, but it ended ${outcome._tag} after steps ${result.steps.join(", ")}: ${outcome.message}`)
      check(this.what, result, expected)
    })
  }

  /** Expects the instance to fail (its compensations run), `match` checked against the failure's text, and what it did. */
  thenFails(match?: string | RegExp, expected: Expected = {}): Promise<void> {
    return this.result().then((result) => {
      const { outcome } = result
      if (outcome._tag === "NotStarted") throw new SpecError(`expected ${this.what} to fail, but the fact does not start it (its when is false)`)
      if (outcome._tag === "Completed") throw new SpecError(`expected ${this.what} to fail, but it completed`, result.steps, "a failure")
      if (!matches(outcome.message, match)) throw new SpecError(`${this.what} failed with another error than expected`, outcome.message, String(match))
      check(this.what, result, expected)
    })
  }

  /** Expects the fact not to start an instance (the workflow's `when` is false for it). */
  thenNotStarted(): Promise<void> {
    return this.result().then(({ outcome, steps }) => {
      if (outcome._tag !== "NotStarted") throw new SpecError(`expected the fact not to start ${this.what}, but it started and ran`, steps, [])
    })
  }

  private async execute(): Promise<WorkflowResult> {
    const { workflow, what, start } = this
    for (const [name, fact] of this.deliveries) {
      const types = (workflow.waitsFor[name] ?? []).map((d: { readonly type: string }) => d.type)
      if (types.length === 0) throw new SpecError(`${what} has no wait named ${name} to deliver a fact to (its waits: ${Object.keys(workflow.waitsFor).join(", ") || "none"})`)
      if (!types.includes(fact.type)) throw new SpecError(`${what}'s wait ${name} waits for ${types.join(" | ")}, not ${fact.type}`)
    }
    const calls: Array<ServiceCall> = []
    let phase: ServiceCall["phase"] = "run"
    let step: MemoryStep | undefined
    const record = (call: Seen) =>
      calls.push({ ...call, step: step?.current?.step ?? null, attempt: step?.current?.attempt ?? null, phase })
    const layer = this.layer ?? undefined
    const platform = TestPlatform.make([Module.make("spec", { workflows: [workflow], layer: layer === undefined ? undefined : recording(layer, record) })], { requireEmitters: false })
    await appendGiven(platform, start.tenant_id, start.stream, [start])
    const stored = (await readStream(platform, start.tenant_id, start.stream)).facts.find((f) => f.fact_id === start.fact_id) ?? start
    const id = await instanceId(workflow.name, stored.tenant_id, stored.stream)
    const latest = platform.registry.latest(stored)
    const none = { instanceId: id, steps: [], compensations: [], attempts: {}, facts: [], emitted: [], sleeps: [], waits: [], calls }
    if (Result.isSuccess(latest) && !workflow.when(latest.success as never)) return { outcome: { _tag: "NotStarted" }, ...none }
    const delivered = await this.deliveredFacts(stored)

    const events = [...platform.queues].filter(([name]) => RetryPolicy.forQueue(name) === RetryPolicy.events && !RetryPolicy.isDeadLetterQueue(name)).map(([, queue]) => queue)
    const emitted = () => events.flatMap((q) => q.sent as Array<WorkflowResult["emitted"][number]>)
    const version = async () => (await readStream(platform, stored.tenant_id, stored.stream)).version
    const params: Params = {
      workflow: workflow.name, tenant_id: stored.tenant_id, stream: stored.stream, instance_id: id, fact_id: stored.fact_id, fact: stored,
      ...(stored.traceparent === undefined ? {} : { traceparent: stored.traceparent })
    }

    return platform.run(Effect.gen(function*() {
      const testClock = yield* TestClock.testClockWith(Effect.succeed)
      yield* testClock.setTime(Date.parse(stored.created_at))
      const memory = step = new MemoryStep({
        event: (type) => {
          const wait = [...delivered.keys()].find((name) => eventType(name) === type)
          return wait === undefined ? undefined : { payload: delivered.get(wait) }
        },
        advance: (ms) => Effect.runPromise(testClock.adjust(ms))
      })
      // A short DurableClock.sleep runs in memory, inside its step: it moves the clock on at once (and is recorded).
      const clock: Clock.Clock = {
        currentTimeMillisUnsafe: () => testClock.currentTimeMillisUnsafe(),
        currentTimeMillis: testClock.currentTimeMillis,
        currentTimeNanosUnsafe: () => testClock.currentTimeNanosUnsafe(),
        currentTimeNanos: testClock.currentTimeNanos,
        monotonicTimeNanosUnsafe: () => testClock.monotonicTimeNanosUnsafe(),
        monotonicTimeNanos: testClock.monotonicTimeNanos,
        sleep: (duration) => {
          const current = memory.current
          if (current === undefined || !current.step.startsWith(inMemorySleep)) return testClock.sleep(duration)
          if (current.attempt === "redelivered") return Effect.void
          return Effect.andThen(testClock.adjust(duration), Effect.sync(() => memory.slept(current.step.slice(inMemorySleep.length), Duration.toMillis(duration))))
        }
      }
      yield* (yield* WorkflowRecords).record([{ tenant_id: stored.tenant_id, instance_id: id, workflow: workflow.name, subject: stored.stream, start_fact_id: stored.fact_id, traceparent: stored.traceparent ?? null }])
      let endedAt: number | undefined
      const outcome = yield* Runner.run(params, memory).pipe(
        Effect.provideService(Engine.BodyEnded, () => void (endedAt ??= memory.log.length)),
        Effect.provideService(Clock.Clock, clock)
      )
      const ran = memory.log.slice()
      const firstVersion = yield* Effect.promise(version)
      const firstEmitted = emitted().length
      const firstCalls = calls.length

      // Replay: as Cloudflare runs the body again after a restart or a wake, on the same step store.
      phase = "replay"
      const replayedFrom = memory.log.length
      const again = yield* Effect.provideService(Runner.run(params, memory), Clock.Clock, clock)
      const rerun = memory.log.slice(replayedFrom).filter((e) => !e.replayed)
      if (rerun.length > 0) {
        throw new SpecError(`${what} is not deterministic: replaying it (as Cloudflare does after a restart or a wake) ran step ${rerun[0]!.name} again — the body took another path, on something it decided outside a step (the time, a random value, a service read): make that a step`)
      }
      const outside = calls.slice(firstCalls)
      if (outside.length > 0) {
        throw new SpecError(`${what} calls ${noted(outside[0]!)} outside any step: replaying it (as Cloudflare does after a restart or a wake) made the call again — make it an Activity (Activity.make), so its result is kept`)
      }
      if ((yield* Effect.promise(version)) !== firstVersion) throw new SpecError(`${what} appended facts again when replayed: append only with wf.append`)
      if (emitted().length !== firstEmitted) throw new SpecError(`${what} emitted messages again when replayed: emit only with wf.emit`)
      if (again._tag !== outcome._tag) throw new SpecError(`${what} ended otherwise when replayed (${again._tag}, first ${outcome._tag})`)

      // Redelivery: each step that succeeded attempted once more, as after an attempt whose answer was lost.
      phase = "redelivery"
      const keys = new Set(emitted().map((m) => m.idempotency_key))
      for (const name of memory.completed) {
        const attempts = ran.find((e) => e.kind === "do" && e.name === name && !e.replayed)
        const first = calls.filter((c) => c.phase === "run" && c.step === name && c.attempt === (attempts?.kind === "do" ? attempts.attempts : 1))
        const from = calls.length
        const redelivered = yield* Effect.promise(() => memory.redeliver(name))
        if (!redelivered.ok) throw new SpecError(`${what}: step ${name} failed when attempted again after it succeeded (a redelivered attempt): ${redelivered.error instanceof Error ? redelivered.error.message : String(redelivered.error)}`)
        const second = calls.slice(from)
        const shape = (list: ReadonlyArray<ServiceCall>) => list.map(({ service, method, args }) => ({ service, method, args }))
        if (!same(shape(second), shape(first))) {
          throw new SpecError(`${what}: step ${name} is not idempotent: attempted again, it made other service calls than the attempt that succeeded — an external call must carry the same idempotency key on every attempt (Activity.idempotencyKey)`, json(shape(second)), json(shape(first)))
        }
        if ((yield* Effect.promise(version)) !== firstVersion) throw new SpecError(`${what}: step ${name} appended more facts when attempted again: append with wf.append (its fact ids are the step's)`)
        const fresh = emitted().map((m) => m.idempotency_key).find((key) => !keys.has(key))
        if (fresh !== undefined) throw new SpecError(`${what}: step ${name} emitted a message under a new idempotency key (${fresh}) when attempted again: emit with wf.emit (its key is the step's)`)
      }

      const stream = yield* Effect.promise(() => readStream(platform, stored.tenant_id, stored.stream))
      const firstRun = ran.filter((e) => !e.replayed)
      const names: Array<string> = []
      for (const e of firstRun) {
        const name = e.kind === "sleep" ? `sleep/${e.name}` : e.kind === "do" ? e.name.replace(/^(wait\/.+)\/read$/, "$1").replace(/^DurableClock\//, "sleep/") : e.name
        if (!runtimeSteps.has(name) && names.at(-1) !== name) names.push(name)
      }
      const attempts: Record<string, number> = {}
      for (const e of firstRun) if (e.kind === "do" && !e.name.startsWith(inMemorySleep)) attempts[e.name] = e.attempts
      const compensations = endedAt === undefined ? [] : ran.slice(endedAt).filter((e) => e.kind === "do" && !e.replayed && !runtimeSteps.has(e.name)).map((e) => e.name)
      return {
        outcome,
        instanceId: id,
        steps: names,
        compensations,
        attempts,
        facts: stream.facts.filter((f) => f.causation_id === stored.fact_id && f.caused_by === workflow.name),
        emitted: emitted().slice(0, firstEmitted),
        sleeps: firstRun.flatMap((e) => (e.kind === "sleep" ? [{ name: e.name, ms: e.ms }] : [])),
        waits: firstRun.flatMap((e) => {
          if (e.kind !== "wait") return []
          const answer = e.answered ? (delivered.get(e.name.replace(/^wait\//, ""))?.type ?? "fact") : "timeout"
          return [{ name: e.name.replace(/^wait\//, ""), timeoutMs: e.timeoutMs, answer }]
        }),
        calls
      } satisfies WorkflowResult
    }).pipe(Effect.provide(TestClock.layer())))
  }

  /** The delivered facts as stored on the start fact's stream (a draft gets the ids a handler's fact would). */
  private async deliveredFacts(start: Fact): Promise<Map<string, Fact>> {
    const out = new Map<string, Fact>()
    let position = 0
    for (const [name, f] of this.deliveries) {
      out.set(name, isStored(f) ? f : {
        fact_id: await FactId.make({ tenantId: start.tenant_id, cause: `delivered:${start.stream}`, decidedBy: name, position: position++ }),
        tenant_id: start.tenant_id,
        stream: start.stream,
        sequence: start.sequence + position,
        type: f.type,
        data: f.data as Record<string, unknown>,
        causation_id: start.fact_id,
        correlation_id: start.correlation_id,
        caused_by: "delivered",
        created_at: start.created_at
      })
    }
    return out
  }
}

/** `WorkflowSpec.for(workflow)`, or `WorkflowSpec.for(workflow, { layer })` for one requiring services. */
export const WorkflowSpec = {
  for: <W extends Workflow.Any>(workflow: W, ...[options]: LayerOptions<Workflow.ServicesOf<W>>) => ({
    /** The fact that starts it (`fact(Qualification, data, { stream })`); `.delivering(wait, fact)` for what its waits receive. */
    when: (fact: Fact): WorkflowRun => new WorkflowRun(workflow, options?.layer, fact, new Map())
  })
}
