/**
 * The registry: everything the product teams registered, checked once at
 * startup and read by every consumer as a service.
 *
 * Built from modules (`Registry.make(modules)`, or `Registry.layer(modules)`
 * for the Worker's runtime). Every configuration mistake that can be found
 * before a message arrives is thrown here, with a message naming both sides:
 * two handlers for one message type, a handler or processor name used twice
 * (fact ids depend on it), a fact type emitted by two modules or defined
 * twice, two projections writing one table, and a projection or processor
 * listening to a fact type that no handler or processor emits, and a message
 * whose name breaks the tense rule of its kind (`Naming.tenseRule`: events in the
 * past tense, commands in the imperative). At run time it
 * routes envelopes (decode + upcast, saying precisely why a message cannot be
 * routed), says where a fact type is relayed, validates the facts a handler
 * or processor returns against their definitions (and stamps them with their
 * definition's latest `schema_version`), and brings stored facts to their
 * type's latest shape (`latest`: the upcaster chain; a version newer than the
 * code is refused). It runs nothing.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import { type Envelope, type Fact, Issues } from "@factline/schemas"
import type * as FactDefinition from "../definitions/FactDefinition.js"
import { type HandlerError, PermanentError } from "../failures/Failure.js"
import type * as Handler from "../definitions/Handler.js"
import type { MessageDefinition } from "../definitions/MessageDefinition.js"
import type { Module } from "../definitions/Module.js"
import type * as Processor from "../definitions/Processor.js"
import * as Timer from "../definitions/Timer.js"
import type * as Projection from "../definitions/Projection.js"
import type * as Webhook from "../definitions/Webhook.js"
import type * as Workflow from "../definitions/Workflow.js"
import { ModuleLayers } from "./ModuleLayers.js"
import * as Registrations from "./Registrations.js"
import * as PersonalChecks from "./PersonalChecks.js"
import type * as Personal from "../personal/Personal.js"
import * as Routing from "./Routing.js"
import type { RouteFailure, Routed } from "./Routing.js"

export { RegistryConfigError } from "./Registrations.js"
export type { RouteFailure, Routed } from "./Routing.js"

/** What decided a batch of drafts: a handler, decider or processor, with what it declares. */
export interface DecidedBy {
  readonly name: string
  readonly emits: ReadonlyArray<FactDefinition.Any>
}

export interface Shape {
  readonly modules: ReadonlyArray<Module>
  /** Message definitions by `message_type`. */
  readonly definitions: ReadonlyMap<string, MessageDefinition>
  /** Fact definitions by type, with the module that owns each. */
  readonly facts: ReadonlyMap<string, { readonly definition: FactDefinition.Any; readonly module: string }>
  readonly handlerFor: (messageType: string) => Handler.Any | undefined
  /** The processors registered for a fact type (several may listen to one type). */
  readonly processorsFor: (factType: string) => ReadonlyArray<Processor.Any>
  readonly projections: ReadonlyArray<Projection.Projection>
  readonly projection: (name: string) => Projection.Projection | undefined
  /** The webhook event catalog, by event type. */
  readonly webhookEvents: ReadonlyMap<string, Webhook.Any>
  /** The catalog events published for a fact type. */
  readonly webhooksFor: (factType: string) => ReadonlyArray<Webhook.Any>
  /** The workflows by name. */
  readonly workflows: ReadonlyMap<string, Workflow.Any>
  /** The workflows a fact of this type starts. */
  readonly workflowsStartedBy: (factType: string) => ReadonlyArray<Workflow.Any>
  /** The waits a fact of this type ends: each a workflow and its wait's name. */
  readonly workflowWaitsFor: (factType: string) => ReadonlyArray<{ readonly workflow: Workflow.Any; readonly wait: string }>
  /**
   * Where a fact of this type is relayed: always to projections (the `facts`
   * projection copies every fact), to fact-processing only if a processor or a workflow listens.
   */
  readonly destinationsFor: (factType: string) => ReadonlyArray<string>
  /** Routes an envelope whose payload is already loaded (`payload_ref` resolved). */
  readonly route: (envelope: Envelope, payload: unknown) => Result.Result<Routed, RouteFailure>
  /**
   * A stored fact in its type's latest shape: the same object when it already is (no copy, no check), else
   * its data upcast through its definition's chain with `schema_version` the latest. Types the registry does
   * not know pass unchanged. The failure (a version newer than this code, an upcaster that throws or
   * produces invalid data) is a `PermanentError` naming the fact, its type and version: nothing may apply it.
   */
  readonly latest: (fact: Fact) => Result.Result<Fact, PermanentError>
  /** The personal data a fact type's facts carry (its definition's `personal(…)`), if any. */
  readonly personalFact: (factType: string) => Personal.Declaration | undefined
  /** The personal data a message type's payloads carry, if any. */
  readonly personalMessage: (messageType: string) => Personal.Declaration | undefined
  /** Whether any message or fact type declares personal data (none: nothing is sealed or opened). */
  readonly hasPersonalData: boolean
}

export class Registry extends Context.Service<Registry, Shape>()("@factline/core/Registry") {
  /** The registry of these modules as a layer; throws at construction (startup) on a misconfiguration. */
  static readonly layer = (modules: ReadonlyArray<Module>) => Layer.succeed(Registry, make(modules))
}

/**
 * Checks the facts a handler, decider or processor returned: each of a type
 * it declares in `emits`, its data valid against that definition. The error
 * names the culprit, the fact and every bad field — a bug in product code, so
 * the message is failed permanently and nothing reaches the ledger.
 */
export const validateDrafts = (by: DecidedBy, drafts: ReadonlyArray<FactDefinition.NewFact<string, unknown> | Timer.Request>): Result.Result<void, string> => {
  for (const [position, entry] of drafts.entries()) {
    // A timer: nothing to check in a cancel; a schedule's fact is checked like a returned fact (Timer.ts).
    if (Timer.isRequest(entry) && entry._tag === "TimerCancel") continue
    const draft = Timer.isRequest(entry) ? entry.fact : entry
    const definition = by.emits.find((d) => d.type === draft?.type)
    if (definition === undefined) {
      return Result.fail(
        `${by.name} returned a fact of type ${JSON.stringify(draft?.type)} (position ${position}), which it does not declare; it declares emits: [${by.emits.map((d) => d.type).join(", ")}]`
      )
    }
    const valid = definition.validate(draft.data)
    if (Result.isFailure(valid)) {
      return Result.fail(`${by.name} returned an invalid ${draft.type} fact (position ${position}): ${Issues.render(valid.failure)}`)
    }
  }
  return Result.succeed(undefined)
}

export interface Options {
  /**
   * Refuse listeners (projections, processors) of fact types no registered handler or processor
   * emits. On by default; the test kit turns it off to test one processor or projection alone.
   */
  readonly requireEmitters?: boolean
}

/**
 * Runs product code that returns facts (a handler, decider or processor) with what the runtime guarantees
 * around it: its module's services (ModuleLayers, built once per isolate), a throw is a defect of this
 * message only (suspended), and the returned facts are checked against what the code declares — an
 * undeclared or invalid fact is a `PermanentError` (a bug: retrying cannot fix it), so nothing is appended.
 */
export const runDeclared = (
  by: DecidedBy,
  run: () => Effect.Effect<ReadonlyArray<FactDefinition.NewFact<string, unknown> | Timer.Request>, HandlerError, any>
): Effect.Effect<ReadonlyArray<Stamped | Timer.Request<Stamped>>, HandlerError, ModuleLayers> =>
  Effect.flatMap(ModuleLayers, (layers) =>
    Effect.flatMap(layers.provide(by.name, Effect.suspend(run)), (facts) => {
      const valid = validateDrafts(by, facts)
      return Result.isFailure(valid) ? Effect.fail(new PermanentError({ message: valid.failure })) : Effect.succeed(stamp(by, facts))
    }))

/** A checked draft with the `schema_version` it is written at: its definition's latest (absent: 1). */
export type Stamped = FactDefinition.NewFact<string, unknown> & { readonly schema_version?: number }

/**
 * Drafts (and the facts timers will append) are written at their definition's latest version; version-1
 * drafts are left as they are (no copy).
 */
const stamp = (by: DecidedBy, facts: ReadonlyArray<FactDefinition.NewFact<string, unknown> | Timer.Request>): ReadonlyArray<Stamped | Timer.Request<Stamped>> => {
  if (by.emits.every((d) => d.latestVersion === 1)) return facts
  const one = (draft: FactDefinition.NewFact<string, unknown>): Stamped => {
    const latestVersion = by.emits.find((d) => d.type === draft.type)!.latestVersion
    return latestVersion === 1 ? draft : { ...draft, schema_version: latestVersion }
  }
  return facts.map((draft) =>
    !Timer.isRequest(draft) ? one(draft) : draft._tag === "TimerSchedule" ? { ...draft, fact: one(draft.fact) } : draft)
}

/** The registry of these modules; throws a `RegistryConfigError` on the first misconfiguration (Registrations). */
export const make = (modules: ReadonlyArray<Module>, options: Options = {}): Shape => {
  Registrations.checkModuleNames(modules)
  const handlers = Registrations.handlersOf(modules)
  const facts = Registrations.factsOf(modules)
  const { readable, processors, projections, webhookEvents, webhooksByFact, workflows, startedBy, waitedBy } = Registrations.listenersOf(modules, facts, options.requireEmitters ?? true)
  PersonalChecks.check(modules)
  const definitions = new Map<string, MessageDefinition>([...handlers].map(([type, h]) => [type, h.handler.message]))
  const personalFacts = new Map([...readable].flatMap(([type, d]) => (d.personalData === undefined ? [] : [[type, d.personalData] as const])))
  const personalMessages = new Map([...definitions].flatMap(([type, d]) => (d.personalData === undefined ? [] : [[type, d.personalData] as const])))
  const destinations = (t: string): ReadonlyArray<string> => [
    "factline-projections",
    ...(processors.has(t) || startedBy.has(t) || waitedBy.has(t) ? ["factline-fact-processing"] : []),
    ...(webhooksByFact.has(t) ? ["factline-webhooks"] : [])
  ]
  const destinationCache = new Map<string, ReadonlyArray<string>>()
  return {
    modules,
    definitions,
    facts,
    handlerFor: (t) => handlers.get(t)?.handler,
    processorsFor: (t) => processors.get(t) ?? [],
    workflows,
    workflowsStartedBy: (t) => startedBy.get(t) ?? [],
    workflowWaitsFor: (t) => waitedBy.get(t) ?? [],
    projections: [...projections.values()],
    projection: (name) => projections.get(name),
    webhookEvents: new Map([...webhookEvents].map(([type, e]) => [type, e.event])),
    webhooksFor: (t) => webhooksByFact.get(t) ?? [],
    destinationsFor: (t) => {
      let known = destinationCache.get(t)
      if (known === undefined) destinationCache.set(t, (known = destinations(t)))
      return known
    },
    route: Routing.route(handlers),
    latest: Routing.latest(readable),
    personalFact: (t) => personalFacts.get(t),
    personalMessage: (t) => personalMessages.get(t),
    hasPersonalData: personalFacts.size > 0 || personalMessages.size > 0
  }
}
