/**
 * Workflows: multi-step work with state that lasts minutes to months — call an external API step by step,
 * sleep, wait for a fact, compensate what was done when a later step fails for good (seed 001's third
 * execution model, beside the Durable Object and the Queue).
 *
 * A module declares a workflow beside its handlers and processors. It is started by a fact (`start`, filtered
 * by `when`), one instance per start key (`key`, default the fact's stream): a redelivered or repeated fact
 * never starts a second instance. Its body is an Effect written with Effect's own workflow vocabulary
 * (`effect/workflow`):
 *
 * - a durable step is an `Activity.make({ name, success, error, execute })`: run once, its result kept; a
 *   `TransientError` (or a defect) is retried by the workflow's `retry` policy, any other failure is kept
 *   as the step's result and returned to the body;
 * - `Activity.idempotencyKey(name)` is the step's stable key for external APIs (same instance, same step:
 *   same key, on every attempt and every replay — seed 002's "step idempotency is mandatory");
 * - `DurableClock.sleep({ name, duration })` sleeps (seconds to months) without holding anything;
 * - `Workflow.withCompensation(step, undo)` registers what undoes a completed step: when the body fails for
 *   good, the compensations of the completed steps run, last first, each once.
 *
 * and factline's own verbs on the handle `wf` the body receives, for what `effect/workflow` has no word for:
 *
 * - `wf.append(step, facts)` appends facts (of types in `emits`) to the start fact's stream, with ids derived
 *   from the instance, the step and the position, so a replay appends nothing twice;
 * - `wf.waitFor(name, { timeout })` waits for a fact of one of the types `waitsFor[name]` lists, on the
 *   instance's key (a fact on the same subject), or the timeout: `Option.none()` on timeout;
 * - `wf.emit(step, definition, payload)` emits an event or command on the events queue with a stable key.
 *
 * On Cloudflare the body runs on Cloudflare Workflows (a `WorkflowEntrypoint`: each Activity one
 * `step.do`, each sleep one `step.sleep`, each wait one `step.waitForEvent`); in Node the test kit runs it
 * (`WorkflowSpec`). This module only describes a workflow; the runtime is `workflows/` in core.
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { WorkflowEngine, WorkflowInstance } from "effect/workflow/WorkflowEngine"
import type { Fact } from "@factline/schemas"
import * as Schema from "effect/Schema"
import { PermanentError, TransientError } from "../failures/Failure.js"
import type * as FactDefinition from "./FactDefinition.js"
import type { MessageDefinition } from "./MessageDefinition.js"
import * as Naming from "./Naming.js"

type Defs = ReadonlyArray<FactDefinition.Any>
type Waits = { readonly [name: string]: Defs }

/**
 * The error schema of a step that calls something outside (`Activity.make({ …, error: Workflow.StepError })`): a
 * `TransientError` is retried by the workflow's policy, a `PermanentError` is the step's result, handed back.
 */
export const StepError = Schema.Union([TransientError, PermanentError])

/** How a step is retried when it fails transiently (Cloudflare's `step.do` retries). */
export interface RetryPolicy {
  /** Attempts after the first. */
  readonly limit: number
  /** The wait before the first retry. */
  readonly delay: Duration.Input
  readonly backoff: "constant" | "linear" | "exponential"
  /** One attempt's time limit. */
  readonly timeout: Duration.Input
}

/** Five retries from 10 seconds, doubling (10 s … 160 s, about 5 minutes in all), 5 minutes per attempt. */
export const defaultRetry: RetryPolicy = { limit: 5, delay: "10 seconds", backoff: "exponential", timeout: "5 minutes" }

/**
 * What the engine running a workflow gives its body (the runtime on Cloudflare, the test kit in Node): the
 * primitives behind the handle's verbs. Product code uses the handle, not this.
 */
export interface Steps {
  readonly instanceId: string
  readonly tenantId: string
  /** The start fact's stream: where `append` writes and where `waitFor` listens. */
  readonly stream: string
  /** Appends facts as the durable step `step`; answers their ids. */
  readonly append: (step: string, facts: ReadonlyArray<FactDefinition.NewFact<string, unknown>>) => Effect.Effect<ReadonlyArray<string>, PermanentError>
  /** Waits (the durable wait `name`) for a fact of one of `types` on the instance's key; none on timeout. */
  readonly waitFor: (name: string, types: ReadonlyArray<string>, timeoutMs: number) => Effect.Effect<Option.Option<Fact>, PermanentError>
  /** Emits a message on the events queue as the durable step `step`, with a stable idempotency key. */
  readonly emit: (step: string, definition: MessageDefinition<string, any>, payload: unknown, subject: string) => Effect.Effect<void, PermanentError>
}

export class WorkflowSteps extends Context.Service<WorkflowSteps, Steps>()("@factline/core/WorkflowSteps") {}

/** What the body's Effect may require beside the module's services: the engine's, provided by the runtime. */
export type Engine = WorkflowEngine | WorkflowInstance | WorkflowSteps | Scope.Scope

/** The handle a workflow's body receives: factline's verbs, typed by the workflow's declarations. */
export interface Handle<E extends Defs, W extends Waits> {
  /** Appends facts of the declared `emits` to the start fact's stream, once (the durable step `step`). Their ids. */
  readonly append: (step: string, facts: ReadonlyArray<FactDefinition.DraftOf<E>>) => Effect.Effect<ReadonlyArray<string>, PermanentError, WorkflowSteps>
  /** The first fact of one of `waitsFor[name]`'s types on this instance's key, or none when `timeout` passes first. */
  readonly waitFor: <K extends keyof W & string>(
    name: K,
    options: { readonly timeout: Duration.Input }
  ) => Effect.Effect<Option.Option<FactDefinition.FactOf<W[K]>>, PermanentError, WorkflowSteps>
  /** Emits an event or command (the durable step `step`; its idempotency key derives from the instance and the step). */
  readonly emit: <A>(step: string, definition: MessageDefinition<string, A>, payload: A, options?: { readonly subject?: string }) => Effect.Effect<void, PermanentError, WorkflowSteps>
}

export interface Workflow<T extends string = string, D = any, E extends Defs = Defs, W extends Waits = Waits, Services = never> {
  readonly _tag: "Workflow"
  readonly name: string
  /** The fact type that starts it. */
  readonly factType: T
  readonly start: FactDefinition.FactDefinition<T, D>
  readonly when: (fact: FactDefinition.StoredFact<T, D>) => boolean
  /** The start key: one instance per (tenant, workflow, key). */
  readonly key: (fact: FactDefinition.StoredFact<T, D>) => string
  readonly emits: E
  readonly waitsFor: W
  readonly retry: RetryPolicy
  /** The body for one instance, its handle bound. */
  readonly run: (fact: FactDefinition.StoredFact<T, D>) => Effect.Effect<unknown, unknown, Services | Engine>
}

export type Any = Workflow<any, any, any, any, any>

/** The services a workflow requires (its body's `R` less what the engine provides). */
export type ServicesOf<W> = W extends Workflow<any, any, any, any, infer S> ? S : never

/** The longest wait for a fact (Cloudflare Workflows' `waitForEvent` and `step.sleep` limit): 365 days. */
export const maxWaitMs = 365 * 24 * 60 * 60 * 1000

const timeoutOf = (name: string, timeout: Duration.Input): number => {
  const duration = Duration.fromInput(timeout)
  const ms = duration._tag === "Some" ? Duration.toMillis(duration.value) : Number.NaN
  if (!Number.isFinite(ms) || ms <= 0) throw new WorkflowError(`wait ${name}: timeout ${JSON.stringify(timeout)} is not a finite, positive duration (e.g. "2 days")`)
  if (ms > maxWaitMs) throw new WorkflowError(`wait ${name}: timeout ${JSON.stringify(timeout)} is longer than Cloudflare Workflows' longest wait (365 days)`)
  return Math.round(ms)
}

export class WorkflowError extends Error {
  override readonly name = "WorkflowError"
}

const handle = <E extends Defs, W extends Waits>(waitsFor: W): Handle<E, W> => ({
  append: (step, facts) => Effect.flatMap(WorkflowSteps, (steps) => steps.append(Naming.check("workflow step", step), facts)),
  waitFor: (name, options) =>
    Effect.flatMap(WorkflowSteps, (steps) =>
      steps.waitFor(Naming.check("workflow step", name), (waitsFor[name] ?? []).map((d) => d.type), timeoutOf(name, options.timeout))) as any,
  emit: (step, definition, payload, options) =>
    Effect.flatMap(WorkflowSteps, (steps) => steps.emit(Naming.check("workflow step", step), definition, payload, options?.subject ?? steps.stream))
})

const none: ReadonlyArray<never> = []

export const make = <T extends string, D, const E extends Defs = [], const W extends Waits = {}, Services = never>(options: {
  readonly name: string
  readonly start: FactDefinition.FactDefinition<T, D>
  /** Which start facts start an instance (default: every one). */
  readonly when?: (fact: FactDefinition.StoredFact<T, D>) => boolean
  /** The start key (default: the fact's stream, i.e. its subject): one instance per key. */
  readonly key?: (fact: FactDefinition.StoredFact<T, D>) => string
  /** The facts it may append. */
  readonly emits?: E
  /** The facts it may wait for, by wait name. */
  readonly waitsFor?: W
  /** How its steps are retried (default `defaultRetry`). */
  readonly retry?: Partial<RetryPolicy>
  readonly run: (fact: FactDefinition.StoredFact<T, D>, wf: Handle<E, W>) => Effect.Effect<unknown, unknown, Services | Engine>
}): Workflow<T, D, E, W, Exclude<Services, Engine>> => {
  Naming.check("workflow", options.name)
  const waitsFor = (options.waitsFor ?? {}) as W
  for (const name of Object.keys(waitsFor)) Naming.check("workflow step", name)
  const wf = handle<E, W>(waitsFor)
  return {
    _tag: "Workflow",
    name: options.name,
    factType: options.start.type,
    start: options.start,
    when: options.when ?? (() => true),
    key: options.key ?? ((fact) => fact.stream),
    emits: (options.emits ?? none) as E,
    waitsFor,
    retry: { ...defaultRetry, ...options.retry },
    run: (fact) => options.run(fact, wf) as Effect.Effect<unknown, unknown, Exclude<Services, Engine> | Engine>
  }
}

/** The retry policy in milliseconds (what the engines use). */
export const retryMillis = (policy: RetryPolicy) => ({
  limit: policy.limit,
  delayMs: Duration.toMillis(Duration.fromInputUnsafe(policy.delay)),
  backoff: policy.backoff,
  timeoutMs: Duration.toMillis(Duration.fromInputUnsafe(policy.timeout))
})

