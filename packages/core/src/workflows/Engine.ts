/**
 * Effect's workflow vocabulary (`effect/workflow`: Activity, DurableClock, Workflow.withCompensation) run on an
 * engine with Cloudflare Workflows' step API: each Activity is one `step.do` (run once, its result kept, retried
 * by the workflow's policy), each `DurableClock.sleep` one `step.sleep`, each `wf.waitFor` a `step.waitForEvent`
 * (in `Steps`). Cloudflare replays `run` from the top on every wake and answers completed steps from its store,
 * which is the replay model `effect/workflow` is written for; so the body is run whole on each invocation, with
 * a `WorkflowEngine` whose activity results come from the step store.
 *
 * What an Activity's failure does: a `TransientError` or a defect is thrown inside the step, so the step is
 * retried (Cloudflare's retries: they survive a restart); any other failure is the step's kept result, handed
 * back to the body, which may handle it or fail. A step whose retries run out fails the body with a defect that
 * names the step. When the body fails, its scope closes with the failure and the compensations registered with
 * `Workflow.withCompensation` run (each an Activity: once), last first.
 *
 * Not supported here (a defect that says so): child workflows (`WorkflowEngine.execute`), a `DurableDeferred`
 * other than a clock's (use `wf.waitFor`: a fact is the durable signal in factline).
 *
 * The `Step` interface is what the engine needs of Cloudflare's `WorkflowStep`; the test kit gives one in memory.
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Activity from "effect/workflow/Activity"
import * as EffectWorkflow from "effect/workflow/Workflow"
import { WorkflowEngine, WorkflowInstance } from "effect/workflow/WorkflowEngine"
import * as Workflow from "../definitions/Workflow.js"
import { TransientError } from "../failures/Failure.js"
import type { StoredFact } from "../definitions/FactDefinition.js"

/** The part of Cloudflare's `WorkflowStep` the engine uses. */
export interface Step {
  readonly do: <T>(name: string, config: StepConfig, callback: () => Promise<T>) => Promise<T>
  readonly sleep: (name: string, duration: number) => Promise<void>
  readonly waitForEvent: <T>(name: string, options: { readonly type: string; readonly timeout: number }) => Promise<{ readonly payload: T; readonly type: string }>
}

export interface StepConfig {
  readonly retries: { readonly limit: number; readonly delay: number; readonly backoff: "constant" | "linear" | "exponential" }
  readonly timeout: number
}

/** A policy as Cloudflare's step config; `delayScale` scales the delays (the platform's retry delay scale: 0 in tests). */
export const stepConfig = (policy: Workflow.RetryPolicy, delayScale = 1): StepConfig => {
  const ms = Workflow.retryMillis(policy)
  return { retries: { limit: ms.limit, delay: Math.round(ms.delayMs * delayScale), backoff: ms.backoff }, timeout: ms.timeoutMs }
}

/** A step's kept result: its value, or the failure the body receives (both encoded as JSON). */
type Kept =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: unknown }
  /** A defect kept as the step's result (retrying cannot fix it): the body fails with it. */
  | { readonly ok: "defect"; readonly message: string }

/** Thrown inside a step so that the engine retries it: the failure's text (never a class instance: it must serialize). */
export class StepAttemptFailed extends Error {
  override readonly name = "StepAttemptFailed"
}

const isTransient = (error: unknown) => error instanceof TransientError

/** Cloudflare Workflows' limit on what one step keeps (a non-stream step result: 1 MiB). */
export const maxStepResultBytes = 1024 * 1024
/** Cloudflare Workflows' longest `step.sleep` (and the longest wait this platform allows): 365 days. */
export const maxSleepMs = 365 * 24 * 60 * 60 * 1000

/** A result over the limit fails the step for good, naming what to do (Cloudflare would refuse it; locally it is not enforced). */
const checkedSize = (name: string, kept: Kept): Kept => {
  const bytes = new TextEncoder().encode(JSON.stringify(kept)).length
  if (bytes <= maxStepResultBytes) return kept
  return { ok: "defect", message: `step ${name} returned ${bytes} bytes, over Cloudflare Workflows' ${maxStepResultBytes} bytes per step: store the data in R2 and return its key (seed 002: payloads by pointer)` }
}

/** Runs one attempt of an activity and says what the step keeps, or throws to have it retried. */
const attempt = async <S extends Schema.Constraint, E extends Schema.Constraint>(activity: Activity.Activity<S, E, any>, services: Context.Context<never>): Promise<Kept> => {
  const exit = await Effect.runPromiseExitWith(services)(activity.execute as Effect.Effect<unknown, unknown>)
  if (Exit.isSuccess(exit)) {
    return checkedSize(activity.name, { ok: true, value: await Effect.runPromise((Schema.encodeUnknownEffect(Schema.toCodecJson(activity.successSchema))(exit.value) as Effect.Effect<unknown, unknown>).pipe(Effect.orDie)) })
  }
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isNone(error) || isTransient(error.value)) throw new StepAttemptFailed(`${activity.name}: ${Cause.pretty(exit.cause)}`)
  return checkedSize(activity.name, { ok: false, error: await Effect.runPromise((Schema.encodeUnknownEffect(Schema.toCodecJson(activity.errorSchema))(error.value) as Effect.Effect<unknown, unknown>).pipe(Effect.orDie)) })
}

const unsupported = (what: string) => Effect.die(new Error(`${what} is not available in a factline workflow: it runs on Cloudflare Workflows (use wf.waitFor for a durable wait)`))

/** A `WorkflowEngine` over one instance's steps. */
export const engineOver = (step: Step, config: StepConfig): WorkflowEngine["Service"] => {
  const clocks = new Set<string>()
  return WorkflowEngine.of({
    register: () => Effect.void,
    execute: () => unsupported("WorkflowEngine.execute (a child workflow)") as never,
    poll: () => unsupported("WorkflowEngine.poll"),
    interrupt: () => unsupported("WorkflowEngine.interrupt"),
    interruptUnsafe: () => unsupported("WorkflowEngine.interruptUnsafe"),
    resume: () => unsupported("WorkflowEngine.resume"),
    activityExecute: (activity, attemptNumber) =>
      Effect.flatMap(Effect.context<never>(), (services) =>
        Effect.tryPromise({
          try: () => step.do(attemptNumber > 1 ? `${activity.name}/${attemptNumber}` : activity.name, config, () => attempt(activity, services)),
          catch: (error) => error
        }).pipe(
          Effect.flatMap((kept) =>
            kept.ok === "defect"
              ? Effect.succeed(Exit.die(new Error(kept.message)) as Exit.Exit<any, any>)
              : kept.ok
              ? Effect.map(Schema.decodeUnknownEffect(Schema.toCodecJson(activity.successSchema))(kept.value) as Effect.Effect<unknown, unknown>, (value) => Exit.succeed(value) as Exit.Exit<any, any>)
              : Effect.map(Schema.decodeUnknownEffect(Schema.toCodecJson(activity.errorSchema))(kept.error) as Effect.Effect<unknown, unknown>, (error) => Exit.fail(error) as Exit.Exit<any, any>)),
          // Retries spent (or a result that no longer decodes): the body fails with a defect naming the step.
          Effect.catch((error) => Effect.succeed(Exit.die(new Error(`step ${activity.name} failed after ${config.retries.limit + 1} attempts: ${error instanceof Error ? error.message : String(error)}`)))),
          Effect.map((exit) => new EffectWorkflow.Complete({ exit }))
        )) as any,
    deferredResult: (deferred) => clocks.has(deferred.name) ? Effect.succeed(Option.some(Exit.void as Exit.Exit<any, any>)) : unsupported(`DurableDeferred ${deferred.name}`),
    deferredDone: () => unsupported("DurableDeferred.done"),
    scheduleClock: (_workflow, { clock }) =>
      Duration.toMillis(clock.duration) > maxSleepMs
        ? Effect.die(new Error(`DurableClock ${clock.name}: ${Duration.format(clock.duration)} is longer than Cloudflare Workflows' longest sleep (365 days); sleep in several steps`))
        : Effect.promise(() => step.sleep(clock.name, Duration.toMillis(clock.duration))).pipe(Effect.tap(() => Effect.sync(() => clocks.add(clock.deferred.name))))
  })
}

/** How one invocation of an instance ended. */
export type Outcome =
  | { readonly _tag: "Completed" }
  | { readonly _tag: "Failed"; readonly message: string }

/**
 * Told when an instance's body has ended (whether it failed), before the compensations of its completed steps
 * run. Does nothing by default; the test kit's `WorkflowSpec` tells compensations from the body's steps by it.
 */
export const BodyEnded = Context.Reference<(failed: boolean) => void>("@factline/core/workflows/Engine/BodyEnded", { defaultValue: () => () => undefined })

const instanceWorkflow = (name: string) => EffectWorkflow.make(name, { payload: {}, idempotencyKey: () => name })

/**
 * Runs a workflow's body for one instance on `step` (from the top: completed steps are answered by the step
 * store), with `steps` behind the handle's verbs. Compensations run when the body fails. Requires the body's
 * services (its module's layer).
 */
export const run = <R = never>(
  definition: Workflow.Any,
  fact: StoredFact,
  options: { readonly instanceId: string; readonly step: Step; readonly steps: Workflow.Steps; readonly delayScale?: number }
): Effect.Effect<Outcome, never, R> => {
  const instance = WorkflowInstance.initial(instanceWorkflow(definition.name), options.instanceId)
  const body = (definition.run(fact) as Effect.Effect<unknown, unknown, never>).pipe(
    Effect.onExit((exit) => Effect.map(Effect.service(BodyEnded), (ended) => ended(Exit.isFailure(exit))))
  )
  return EffectWorkflow.intoResult(body).pipe(
    Effect.provideService(WorkflowInstance, instance),
    Effect.provideService(WorkflowEngine, engineOver(options.step, stepConfig(definition.retry, options.delayScale))),
    Effect.provideService(Workflow.WorkflowSteps, options.steps),
    Effect.map((result): Outcome =>
      result._tag === "Suspended"
        ? { _tag: "Failed", message: `workflow ${definition.name} suspended, which Cloudflare Workflows cannot resume: ${result.cause === undefined ? "no cause" : Cause.pretty(result.cause)}` }
        : Exit.isSuccess(result.exit)
          ? { _tag: "Completed" }
          : { _tag: "Failed", message: Cause.pretty(result.exit.cause) }),
    Effect.catchCause((cause) => Effect.succeed<Outcome>({ _tag: "Failed", message: Cause.pretty(cause) }))
  )
}
