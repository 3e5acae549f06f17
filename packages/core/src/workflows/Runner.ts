/**
 * One invocation of a workflow instance, from Cloudflare's side (`FactlineWorkflow.run` in @factline/workers):
 * decode the params, find the workflow in the registry and its start fact (inline, or read from the ledger by
 * id), run its body on the engine (Engine.ts) with the module's services, behind the handle's verbs:
 *
 * - `append`: one `step.do` that checks the facts against the workflow's `emits`, appends them to the start
 *   fact's stream with ids derived from (tenant, instance, workflow/step, position) — a replayed or retried
 *   step appends nothing twice — relays them like any appended fact, and notes their ids on the instance;
 * - `waitFor`: one `step.do` that reads the stream for a matching fact after the start fact (one that came
 *   before the instance waited, or before it existed), else `step.waitForEvent` for the fact the
 *   fact-processing consumer delivers (Instances.dispatch); `none` when the timeout passes;
 * - `emit`: one `step.do` that emits the message with the idempotency key `<instance>:<step>`.
 *
 * The instance's row in `workflow_instances` follows it: each attempt of a step, a sleep (until when), a wait
 * (for what, until when), compensation, and how it ended. An instance whose body failed for good (after its
 * compensations ran) answers `Failed`: the entrypoint then fails the Cloudflare instance, so it shows as
 * errored there too.
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type Fact, TraceContext } from "@factline/schemas"
import type * as FactDefinition from "../definitions/FactDefinition.js"
import type { MessageDefinition } from "../definitions/MessageDefinition.js"
import type * as Workflow from "../definitions/Workflow.js"
import * as Failure from "../failures/Failure.js"
import * as FactId from "../ledger/FactId.js"
import { Ledger } from "../ledger/Ledger.js"
import { Producer, QueueSendFailed } from "../producing/Producer.js"
import { relay } from "../relay/FactRelay.js"
import type { PayloadStore } from "../producing/PayloadStore.js"
import type { Queues } from "../platform/Queues.js"
import { ModuleLayers } from "../registry/ModuleLayers.js"
import { Registry, runDeclared } from "../registry/Registry.js"
import * as Time from "../platform/Time.js"
import type * as Sql from "../platform/Sql.js"
import type { TenantPlacement } from "../placement/Placement.js"
import * as Engine from "./Engine.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import { eventType, Params } from "./Instances.js"
import * as WorkflowDeadLetters from "./WorkflowDeadLetters.js"
import { WorkflowRecords } from "./WorkflowRecords.js"

/** What the verbs' steps run with: the platform's services they use. */
type Needs = Ledger | Registry | Producer | WorkflowRecords | ModuleLayers | Queues | PayloadStore | Sql.PlatformDatabase | TenantPlacement | KeyRing

/**
 * A fact as the body sees it: personal fields opened (the marker once erased) and in its type's latest shape. Facts
 * travel sealed — in the instance's params, its events and its steps' results — and are opened here, outside any
 * step, so Cloudflare's store never keeps them in plaintext. The key store is retried briefly; past that, a defect.
 */
const readable = (services: Context.Context<Needs>, fact: Fact): Effect.Effect<Fact> =>
  Effect.gen(function*() {
    const registry = Context.get(services, Registry)
    const [plain] = registry.hasPersonalData
      ? yield* Sealing.openFacts(Context.get(services, KeyRing), registry.personalFact, [fact]).pipe(
        Effect.retry({ times: 3, schedule: Schedule.exponential("200 millis") }),
        Effect.orDie
      )
      : [fact]
    const current = registry.latest(plain!)
    return Result.isSuccess(current) ? current.success : plain!
  })

/** Thrown inside a step to have Cloudflare retry it (a transient failure: the ledger or a queue was unavailable). */
class Retry extends Error {
  override readonly name = "Retry"
}

/** What a verb's step keeps: its result, or the permanent failure the body receives. */
type Kept<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly message: string }

const isTimeout = (error: unknown) => /WorkflowTimeoutError|timed out|timeout/i.test(error instanceof Error ? `${error.name} ${error.message}` : String(error))

/**
 * Runs an Effect inside a step with the platform's services: a permanent failure is kept (returned), anything
 * else thrown so that the step is retried.
 */
const inStep = <A>(services: Context.Context<Needs>, effect: Effect.Effect<A, unknown, Needs>) => async (): Promise<Kept<A>> => {
  const exit = await Effect.runPromiseExitWith(services)(effect)
  if (Exit.isSuccess(exit)) return { ok: true, value: exit.value }
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isSome(error) && error.value instanceof Failure.PermanentError) return { ok: false, message: error.value.message }
  throw new Retry(Option.isSome(error) && error.value instanceof Error ? error.value.message : Cause.pretty(exit.cause))
}

const unkept = <A>(kept: Kept<A>): Effect.Effect<A, Failure.PermanentError> =>
  kept.ok ? Effect.succeed(kept.value) : Effect.fail(new Failure.PermanentError({ message: kept.message }))

const appendStep = (definition: Workflow.Any, params: Params, start: Fact, step: string, drafts: ReadonlyArray<FactDefinition.NewFact<string, unknown>>) =>
  Effect.gen(function*() {
    const stamped = yield* runDeclared({ name: definition.name, emits: definition.emits }, () => Effect.succeed(drafts))
    const now = yield* Time.now
    const traceparent = TraceContext.child(params.traceparent)
    const facts = yield* Effect.promise(() => Promise.all(stamped.map(async (d, position) => {
      const draft = d as FactDefinition.NewFact<string, unknown> & { readonly schema_version?: number }
      return {
        fact_id: await FactId.make({ tenantId: params.tenant_id, cause: params.instance_id, decidedBy: `${definition.name}/${step}`, position }),
        type: draft.type,
        data: draft.data as Record<string, unknown>,
        ...(draft.schema_version === undefined ? {} : { schema_version: draft.schema_version }),
        causation_id: start.fact_id,
        correlation_id: start.correlation_id,
        caused_by: definition.name,
        created_at: now,
        traceparent
      }
    })))
    const [result] = yield* (yield* Ledger).append([{ tenant_id: params.tenant_id, stream: params.stream, facts }])
    if (result === undefined || result.status === "unavailable") return yield* new Failure.TransientError({ message: `the ledger is unavailable: ${result?.message ?? "no answer"}` })
    if (result.status === "idempotency_conflict") return yield* new Failure.PermanentError({ message: result.message })
    if (result.status === "version_conflict") return yield* new Failure.TransientError({ message: "unexpected version conflict" })
    const registry = yield* Registry
    const report = yield* relay(result.facts.map((fact) => ({ fact, destinations: registry.destinationsFor(fact.type) })))
    if (report.unrelayed.size > 0) return yield* new Failure.TransientError({ message: `facts could not be relayed: ${report.error ?? "unknown error"}` })
    const ids = facts.map((f) => f.fact_id)
    yield* (yield* WorkflowRecords).appended(params.tenant_id, params.instance_id, ids)
    return ids
  })

/** The first fact of `types` after the start fact in the instance's stream, if one is there already. */
const findStep = (params: Params, start: Fact, types: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const state = yield* (yield* Ledger).read({ tenant_id: params.tenant_id, stream: params.stream }, { after: start.sequence })
    return state.facts.find((f) => types.includes(f.type)) ?? null
  })

const emitStep = (params: Params, start: Fact, step: string, definition: MessageDefinition<string, any>, payload: unknown, subject: string) =>
  Effect.gen(function*() {
    const producer = yield* Producer
    yield* producer.emit(definition, payload, {
      tenant_id: params.tenant_id,
      subject,
      idempotency_key: `${params.instance_id}:${step}`,
      causation_id: start.fact_id,
      correlation_id: start.correlation_id,
      traceparent: TraceContext.child(params.traceparent)
    }).pipe(Effect.mapError((error) =>
      // What retrying may fix (the queue or the store down) is retried; a refusal of the message is final.
      error instanceof Failure.Unavailable || error instanceof QueueSendFailed
        ? new Failure.TransientError({ message: error.message })
        : new Failure.PermanentError({ message: error.message })))
  })

/** The verbs behind a running instance's handle, over Cloudflare's step. */
const stepsFor = (services: Context.Context<Needs>, definition: Workflow.Any, params: Params, start: Fact, step: Engine.Step, delayScale: number): Workflow.Steps => {
  const config = Engine.stepConfig(definition.retry, delayScale)
  const records = Context.get(services, WorkflowRecords)
  const attempt = <A>(name: string, effect: Effect.Effect<A, unknown, Needs>) =>
    inStep(services, Effect.andThen(Effect.ignore(records.attempt(params.tenant_id, params.instance_id, name)), effect))
  const move = (m: Parameters<typeof records.move>[2]) => Effect.ignore(records.move(params.tenant_id, params.instance_id, m))
  return {
    instanceId: params.instance_id,
    tenantId: params.tenant_id,
    stream: params.stream,
    append: (name, drafts) =>
      Effect.flatMap(
        Effect.promise(() => step.do(`append/${name}`, config, attempt(`append/${name}`, appendStep(definition, params, start, name, drafts)))),
        unkept
      ),
    waitFor: (name, types, timeoutMs) =>
      Effect.gen(function*() {
        const found = yield* unkept(yield* Effect.promise(() => step.do(`wait/${name}/read`, config, attempt(`wait/${name}`, findStep(params, start, types)))))
        if (found !== null) return Option.some(yield* readable(services, found))
        const now = yield* Time.now
        yield* move({ status: "waiting", step: `wait/${name}`, waiting_for: `${name} (${types.join(" | ")})`, wait_until: new Date(Date.parse(now) + timeoutMs).toISOString() })
        const event = yield* Effect.tryPromise({ try: () => step.waitForEvent<Fact>(`wait/${name}`, { type: eventType(name), timeout: timeoutMs }), catch: (error) => error }).pipe(
          Effect.map((received) => Option.some(received.payload)),
          Effect.catch((error) => isTimeout(error) ? Effect.succeed(Option.none<Fact>()) : Effect.die(error))
        )
        yield* move({ status: "running", waiting_for: null, wait_until: null })
        return Option.isSome(event) ? Option.some(yield* readable(services, event.value)) : event
      }),
    emit: (name, definition, payload, subject) =>
      Effect.flatMap(
        Effect.promise(() => step.do(`emit/${name}`, config, attempt(`emit/${name}`, emitStep(params, start, name, definition, payload, subject)))),
        unkept
      )
  }
}

/** A step whose every attempt is noted on the instance's row (the Activity steps: what `Engine` runs). */
const noted = (services: Context.Context<Needs>, params: Params, step: Engine.Step): Engine.Step => {
  const records = Context.get(services, WorkflowRecords)
  const note = (effect: Effect.Effect<void, unknown>) => Effect.runPromise(Effect.ignore(effect))
  return {
    do: (name, config, callback) => step.do(name, config, async () => {
      await note(records.attempt(params.tenant_id, params.instance_id, name))
      return callback()
    }),
    sleep: async (name, duration) => {
      await note(Effect.flatMap(Time.now, (now) => records.move(params.tenant_id, params.instance_id, { status: "sleeping", step: `sleep/${name}`, wait_until: new Date(Date.parse(now) + duration).toISOString() })))
      await step.sleep(name, duration)
      await note(records.move(params.tenant_id, params.instance_id, { status: "running", wait_until: null }))
    },
    waitForEvent: step.waitForEvent
  }
}

/** The runtime's own steps (not the body's): reading a start fact passed by id, recording the start and the end, the dead letter. */
export const startStep = "record-start"
export const endStep = "record-end"
export const runtimeSteps: ReadonlyArray<string> = ["start/read", startStep, endStep, "dead-letter"]

/** How an invocation ended, for the entrypoint. */
export type Ended = Engine.Outcome | { readonly _tag: "Refused"; readonly message: string }

/** Runs one invocation of the instance these params describe, on `step`. */
export const run = Effect.fn("Workflows.run")(function*(input: unknown, step: Engine.Step, retryDelayScale = 1) {
  const decoded = Schema.decodeUnknownExit(Params)(input)
  if (Exit.isFailure(decoded)) return { _tag: "Refused", message: `the instance's params are not a factline workflow's: ${Cause.pretty(decoded.cause)}` } satisfies Ended as Ended
  const params = decoded.value
  const registry = yield* Registry
  const definition = registry.workflows.get(params.workflow)
  if (definition === undefined) return { _tag: "Refused", message: `no workflow named ${params.workflow} is registered (was it removed while instances ran?)` } satisfies Ended as Ended
  const records = yield* WorkflowRecords
  const services = yield* Effect.context<Needs>()
  const ledger = yield* Ledger
  const start = params.fact ?? (yield* Effect.flatMap(
    Effect.promise(() => step.do("start/read", Engine.stepConfig(definition.retry, retryDelayScale), inStep(services, ledger.findFact(params.tenant_id, params.fact_id)))),
    unkept
  ).pipe(Effect.orDie))
  if (start === null) return { _tag: "Refused", message: `the start fact ${params.fact_id} is not in the ledger` } satisfies Ended as Ended
  const current = registry.latest(yield* readable(services, start))
  if (Result.isFailure(current)) return { _tag: "Refused", message: current.failure.message } satisfies Ended as Ended
  // The instance records itself (INSERT OR IGNORE: its first run does, a replay changes nothing), as a step
  // retried until D1 takes it — the consumer that started it wrote nothing to D1 — then says it runs.
  const recorded = records.record([{
    tenant_id: params.tenant_id, instance_id: params.instance_id, workflow: definition.name, subject: params.stream,
    start_fact_id: params.fact_id, traceparent: params.traceparent ?? null
  }])
  yield* Effect.flatMap(Effect.promise(() => step.do(startStep, Engine.stepConfig(definition.retry, retryDelayScale), inStep(services, recorded))), unkept).pipe(Effect.orDie)
  yield* Effect.ignore(records.move(params.tenant_id, params.instance_id, { status: "running" }))
  const layers = yield* ModuleLayers
  const outcome = yield* layers.provide(definition.name, Engine.run(definition, current.success, {
    instanceId: params.instance_id,
    step: noted(services, params, step),
    steps: stepsFor(services, definition, params, current.success, step, retryDelayScale),
    delayScale: retryDelayScale
  })).pipe(Effect.catch((error) => Effect.succeed<Engine.Outcome>({ _tag: "Failed", message: error.message })))
  // How it ended, as a step of its own (retried until D1 takes it: the operators' index must not stay `running`).
  const ended = records.move(params.tenant_id, params.instance_id, outcome._tag === "Completed"
    ? { status: "complete", waiting_for: null, wait_until: null, error: null }
    : { status: "failed", waiting_for: null, wait_until: null, error: outcome.message })
  yield* Effect.promise(() => step.do(endStep, Engine.stepConfig(definition.retry, retryDelayScale), inStep(services, ended)))
  // Failed for good: a dead letter with its context (WorkflowDeadLetters), as a step of its own (retried until stored).
  if (outcome._tag !== "Completed") {
    const recorded = Effect.flatMap(records.get({ tenantId: params.tenant_id }, params.instance_id), (row) =>
      WorkflowDeadLetters.record(params, { message: outcome.message, attempts: row.attempts, startedAt: row.started_at }))
    yield* Effect.promise(() => step.do("dead-letter", Engine.stepConfig(definition.retry, retryDelayScale), inStep(services, recorded)))
  }
  return outcome as Ended
})
