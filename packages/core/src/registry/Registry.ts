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
import { type Envelope, type Fact, type FailureReason, Issues } from "@factline/schemas"
import type * as FactDefinition from "../definitions/FactDefinition.js"
import { type HandlerError, PermanentError } from "../failures/Failure.js"
import type * as Handler from "../definitions/Handler.js"
import type { MessageDefinition } from "../definitions/MessageDefinition.js"
import type { Module } from "../definitions/Module.js"
import type * as Processor from "../definitions/Processor.js"
import * as Naming from "../definitions/Naming.js"
import * as Timer from "../definitions/Timer.js"
import * as PlatformFacts from "../definitions/PlatformFacts.js"
import * as Projection from "../definitions/Projection.js"
import type * as Webhook from "../definitions/Webhook.js"
import { ModuleLayers } from "./ModuleLayers.js"

export class RegistryConfigError extends Error {
  override readonly name = "RegistryConfigError"
}

export interface Routed {
  readonly handler: Handler.Any
  readonly message: Handler.Message<unknown>
}

export interface RouteFailure {
  readonly reason: Extract<FailureReason, "unknown_message_type" | "unsupported_version" | "decode_error">
  readonly message: string
  readonly problems: ReadonlyArray<Issues.Problem>
}

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
  /**
   * Where a fact of this type is relayed: always to projections (the `facts`
   * projection copies every fact), to fact-processing only if a processor listens.
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

/** The message of a fact that cannot be brought to its type's latest shape: type, version, id, what to do. */
const notReadable = (fact: Fact, problem: FactDefinition.UpcastProblem): PermanentError =>
  new PermanentError({
    reason: problem._tag === "UnsupportedVersion" ? "unsupported_version" : "permanent_failure",
    message: problem._tag === "UnsupportedVersion"
      ? `fact ${fact.fact_id} (${fact.type}) has schema_version ${fact.schema_version ?? 1}, which this code does not know: ${problem.message}; deploy the code that defines it, then replay this dead letter`
      : `fact ${fact.fact_id} (${fact.type}, schema_version ${fact.schema_version ?? 1}) cannot be upcast: ${problem.message}; fix the upcaster, then replay this dead letter`
  })

export const make = (modules: ReadonlyArray<Module>, options: Options = {}): Shape => {
  const requireEmitters = options.requireEmitters ?? true
  const fail = (message: string): never => {
    throw new RegistryConfigError(message)
  }
  const moduleNames = new Set<string>()
  for (const module of modules) {
    if (moduleNames.has(module.name)) fail(`module name "${module.name}" is registered twice`)
    moduleNames.add(module.name)
  }

  // Handlers and processors: one handler per message type, one owner per name.
  const handlers = new Map<string, { handler: Handler.Any; module: string }>()
  const names = new Map<string, string>()
  const claim = (kind: string, name: string, module: string) => {
    const owner = names.get(name)
    if (owner !== undefined) fail(`${kind} name "${name}" is used twice (modules ${owner} and ${module}); fact ids depend on it`)
    names.set(name, module)
  }
  for (const module of modules) {
    for (const handler of module.handlers) {
      const type = handler.message.messageType
      const existing = handlers.get(type)
      if (existing) {
        fail(`two handlers for message type "${type}": "${existing.handler.name}" (module ${existing.module}) and "${handler.name}" (module ${module.name})`)
      }
      claim(handler._tag === "Decider" ? "decider" : "handler", handler.name, module.name)
      const { kind } = handler.message
      if (!Naming.suitsKind(kind, type)) {
        const word = type.split(/[._-]/).pop()
        const by = `${handler._tag === "Decider" ? "decider" : "handler"} "${handler.name}", module ${module.name}`
        fail(kind === "event"
          ? `event "${type}" (${by}) is not named in the past tense: its last word "${word}" does not say what happened. The rule: ${Naming.tenseRule}. Rename it to say what happened, or define it with MessageDefinition.command if it asks for something to be done`
          : `command "${type}" (${by}) is named in the past tense: its last word "${word}" says what happened. The rule: ${Naming.tenseRule}. Rename it to say what to do, or define it with MessageDefinition.event if it reports something that happened`)
      }
      handlers.set(type, { handler, module: module.name })
    }
    for (const processor of module.processors) claim("processor", processor.name, module.name)
  }

  // Fact types: owned by the one module whose handlers and processors emit them; the platform's own are reserved.
  const facts = new Map<string, { definition: FactDefinition.Any; module: string; by: string }>(
    PlatformFacts.all.map((definition) => [definition.type, { definition, module: PlatformFacts.moduleName, by: "the platform" }])
  )
  for (const module of modules) {
    const emitters: Array<{ by: string; emits: ReadonlyArray<FactDefinition.Any> }> = [
      ...module.handlers.map((h) => ({ by: `${h._tag === "Decider" ? "decider" : "handler"} "${h.name}"`, emits: h.emits })),
      ...module.processors.map((p) => ({ by: `processor "${p.name}"`, emits: p.emits }))
    ]
    for (const { by, emits } of emitters) {
      for (const definition of emits) {
        const owner = facts.get(definition.type)
        if (owner === undefined) facts.set(definition.type, { definition, module: module.name, by })
        else if (owner.module === PlatformFacts.moduleName) {
          fail(`fact type "${definition.type}" is reserved: the platform appends it (${by}, module ${module.name}, may not emit it)`)
        } else if (owner.module !== module.name) {
          fail(`fact type "${definition.type}" is emitted by ${owner.by} (module ${owner.module}) and by ${by} (module ${module.name}); a fact type belongs to one module`)
        } else if (owner.definition !== definition) {
          fail(`fact type "${definition.type}" has two definitions in module ${module.name} (${owner.by} and ${by}); define it once and share it`)
        }
      }
    }
  }
  /** Every definition the registry can upcast with: the emitted ones, and (without emitters) the listened ones. */
  const readable = new Map<string, FactDefinition.Any>([...facts].map(([type, f]) => [type, f.definition]))
  /** A listener must use the owner's definition of a fact that some handler or processor emits. */
  const listens = (listener: string, module: string, definition: FactDefinition.Any) => {
    const owner = facts.get(definition.type)
    if (owner === undefined) {
      if (!requireEmitters) {
        if (!readable.has(definition.type)) readable.set(definition.type, definition)
        return
      }
      fail(`${listener} (module ${module}) listens to fact type "${definition.type}", which no handler or processor emits; add it to the emits of the handler or processor that appends it`)
    } else if (owner.definition !== definition) {
      fail(`${listener} (module ${module}) uses its own definition of fact type "${definition.type}", which ${owner.by} (module ${owner.module}) defines; import that definition instead`)
    }
  }

  const processors = new Map<string, Array<Processor.Any>>()
  const projections = new Map<string, Projection.Projection>()
  const tables = new Map<string, string>()
  for (const module of modules) {
    for (const processor of module.processors) {
      listens(`processor "${processor.name}"`, module.name, processor.fact)
      processors.set(processor.factType, [...(processors.get(processor.factType) ?? []), processor])
    }
    for (const projection of module.projections) {
      if (projection.name === "facts") fail(`projection name "facts" is the built-in copy of every fact; choose another name (module ${module.name})`)
      if (projections.has(projection.name)) fail(`projection name "${projection.name}" is used twice (module ${module.name})`)
      const table = Projection.tableName(projection)
      const writer = tables.get(table)
      if (writer !== undefined) fail(`projections "${writer}" and "${projection.name}" both write table "${table}"; a table belongs to one projection`)
      if (table === "facts") fail(`projection "${projection.name}" writes table "facts", the built-in copy of every fact`)
      const declared = Object.values(module.tables)
      if (declared.length > 0 && !declared.includes(projection.table)) {
        fail(`projection "${projection.name}" writes table "${table}", which is not among module ${module.name}'s tables; export it from the module's Tables.ts`)
      }
      for (const mapping of projection.on) listens(`projection "${projection.name}"`, module.name, mapping.fact)
      projections.set(projection.name, projection)
      tables.set(table, projection.name)
    }
  }
  const webhookEvents = new Map<string, { event: Webhook.Any; module: string }>()
  const webhooksByFact = new Map<string, Array<Webhook.Any>>()
  for (const module of modules) {
    for (const event of module.webhooks) {
      const existing = webhookEvents.get(event.type)
      if (existing) fail(`webhook event type "${event.type}" is published twice (modules ${existing.module} and ${module.name})`)
      listens(`webhook event "${event.type}"`, module.name, event.fact)
      webhookEvents.set(event.type, { event, module: module.name })
      webhooksByFact.set(event.fact.type, [...(webhooksByFact.get(event.fact.type) ?? []), event])
    }
  }
  const definitions = new Map<string, MessageDefinition>([...handlers].map(([type, h]) => [type, h.handler.message]))
  const destinations = (t: string): ReadonlyArray<string> => [
    "factline-projections",
    ...(processors.has(t) ? ["factline-fact-processing"] : []),
    ...(webhooksByFact.has(t) ? ["factline-webhooks"] : [])
  ]
  const destinationCache = new Map<string, ReadonlyArray<string>>()

  const route = (envelope: Envelope, payload: unknown): Result.Result<Routed, RouteFailure> => {
    const entry = handlers.get(envelope.message_type)
    if (!entry) {
      return Result.fail({
        reason: "unknown_message_type",
        message: `no handler is registered for message_type "${envelope.message_type}"`,
        problems: [{ path: "message_type", message: `unknown message type "${envelope.message_type}"` }]
      })
    }
    const decoded = entry.handler.message.decode(envelope.schema_version, payload)
    if (Result.isFailure(decoded)) {
      const problem = decoded.failure
      return Result.fail(
        problem._tag === "UnsupportedVersion"
          ? { reason: "unsupported_version", message: problem.message, problems: [{ path: "schema_version", message: problem.message }] }
          : { reason: "decode_error", message: `invalid ${envelope.message_type} payload`, problems: problem.problems }
      )
    }
    return Result.succeed({
      handler: entry.handler,
      message: {
        payload: decoded.success,
        messageType: envelope.message_type,
        receivedSchemaVersion: envelope.schema_version,
        messageId: envelope.message_id,
        idempotencyKey: envelope.idempotency_key,
        correlationId: envelope.correlation_id,
        causationId: envelope.causation_id,
        tenantId: envelope.tenant_id,
        subject: envelope.subject,
        source: envelope.source,
        createdAt: envelope.created_at,
        traceparent: envelope.traceparent
      }
    })
  }

  const latest = (fact: Fact): Result.Result<Fact, PermanentError> => {
    const definition = readable.get(fact.type)
    const stored = fact.schema_version ?? 1
    if (definition === undefined || stored === definition.latestVersion) return Result.succeed(fact)
    const upcast = definition.upcast(stored, fact.data)
    return Result.isFailure(upcast)
      ? Result.fail(notReadable(fact, upcast.failure))
      : Result.succeed({ ...fact, data: upcast.success as Record<string, unknown>, schema_version: definition.latestVersion })
  }

  return {
    modules,
    definitions,
    facts,
    handlerFor: (t) => handlers.get(t)?.handler,
    processorsFor: (t) => processors.get(t) ?? [],
    projections: [...projections.values()],
    projection: (name) => projections.get(name),
    webhookEvents: new Map([...webhookEvents].map(([type, e]) => [type, e.event])),
    webhooksFor: (t) => webhooksByFact.get(t) ?? [],
    destinationsFor: (t) => {
      let known = destinationCache.get(t)
      if (known === undefined) destinationCache.set(t, (known = destinations(t)))
      return known
    },
    route,
    latest
  }
}
