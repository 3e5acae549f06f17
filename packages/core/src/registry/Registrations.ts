/**
 * What the modules registered, gathered into the registry's tables at startup and checked on the way: module
 * names once each, one handler per message type and one owner per handler or processor name (fact ids depend
 * on it), events and commands named by the tense rule, one owning module per fact type (the platform's own are
 * reserved), listeners using the owner's definition, projections' names and tables once each, webhook event
 * types once each. Every mistake throws a `RegistryConfigError` naming both sides; the checks run in this
 * order, so the first mistake found is the one reported. Reads nothing at run time: Registry.make does.
 */
import type * as FactDefinition from "../definitions/FactDefinition.js"
import type * as Handler from "../definitions/Handler.js"
import type { Module } from "../definitions/Module.js"
import * as Naming from "../definitions/Naming.js"
import * as PlatformFacts from "../definitions/PlatformFacts.js"
import type * as Processor from "../definitions/Processor.js"
import * as Projection from "../definitions/Projection.js"
import type * as Webhook from "../definitions/Webhook.js"
import type * as Workflow from "../definitions/Workflow.js"

export class RegistryConfigError extends Error {
  override readonly name = "RegistryConfigError"
}

const fail = (message: string): never => {
  throw new RegistryConfigError(message)
}

/** Each module's name is registered once. */
export const checkModuleNames = (modules: ReadonlyArray<Module>) => {
  const moduleNames = new Set<string>()
  for (const module of modules) {
    if (moduleNames.has(module.name)) fail(`module name "${module.name}" is registered twice`)
    moduleNames.add(module.name)
  }
}

/** The handlers by message type, each with its module; handler, decider and processor names claimed once each. */
export const handlersOf = (modules: ReadonlyArray<Module>) => {
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
    for (const workflow of module.workflows) claim("workflow", workflow.name, module.name)
  }
  return handlers
}

/** A fact type's owner: its definition, the module whose code emits it and which code (`by`). */
export type Owners = ReadonlyMap<string, { readonly definition: FactDefinition.Any; readonly module: string; readonly by: string }>

/** Fact types: owned by the one module whose handlers and processors emit them; the platform's own are reserved. */
export const factsOf = (modules: ReadonlyArray<Module>) => {
  const facts = new Map<string, { definition: FactDefinition.Any; module: string; by: string }>(
    PlatformFacts.all.map((definition) => [definition.type, { definition, module: PlatformFacts.moduleName, by: "the platform" }])
  )
  for (const module of modules) {
    const emitters: Array<{ by: string; emits: ReadonlyArray<FactDefinition.Any> }> = [
      ...module.handlers.map((h) => ({ by: `${h._tag === "Decider" ? "decider" : "handler"} "${h.name}"`, emits: h.emits })),
      ...module.processors.map((p) => ({ by: `processor "${p.name}"`, emits: p.emits })),
      ...module.workflows.map((w) => ({ by: `workflow "${w.name}"`, emits: w.emits }))
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
  return facts
}

/**
 * The listeners' check: a listener must use the owner's definition of a fact that some handler or processor emits
 * (without `requireEmitters`, a fact nobody emits is allowed, and its definition joins `readable`). `readable`:
 * every definition the registry can upcast with.
 */
const listening = (facts: Owners, requireEmitters: boolean) => {
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
  return { readable, listens }
}

/** The processors by fact type and the projections by name, checked (each projection's table written by it alone). */
const processorsAndProjections = (modules: ReadonlyArray<Module>, listens: ReturnType<typeof listening>["listens"]) => {
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
  return { processors, projections }
}

/** The webhook event catalog by event type (each with its module), and the events published per fact type. */
const webhooksOf = (modules: ReadonlyArray<Module>, listens: ReturnType<typeof listening>["listens"]) => {
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
  return { webhookEvents, webhooksByFact }
}

/**
 * The workflows by the fact type that starts them, and the waits by the fact type that ends them (each a
 * workflow and one of its wait names); the facts they start on and wait for checked like any listener's.
 */
const workflowsOf = (modules: ReadonlyArray<Module>, listens: ReturnType<typeof listening>["listens"]) => {
  const workflows = new Map<string, Workflow.Any>()
  const startedBy = new Map<string, Array<Workflow.Any>>()
  const waitedBy = new Map<string, Array<{ readonly workflow: Workflow.Any; readonly wait: string }>>()
  for (const module of modules) {
    for (const workflow of module.workflows) {
      listens(`workflow "${workflow.name}"`, module.name, workflow.start)
      workflows.set(workflow.name, workflow)
      startedBy.set(workflow.factType, [...(startedBy.get(workflow.factType) ?? []), workflow])
      for (const [wait, definitions] of Object.entries(workflow.waitsFor) as Array<[string, ReadonlyArray<FactDefinition.Any>]>) {
        for (const definition of definitions) {
          listens(`workflow "${workflow.name}" (wait ${wait})`, module.name, definition)
          waitedBy.set(definition.type, [...(waitedBy.get(definition.type) ?? []), { workflow, wait }])
        }
      }
    }
  }
  return { workflows, startedBy, waitedBy }
}

/** What listens to facts — processors, projections, webhook events, workflows — checked against the facts' owners. */
export const listenersOf = (modules: ReadonlyArray<Module>, facts: Owners, requireEmitters: boolean) => {
  const { readable, listens } = listening(facts, requireEmitters)
  return { readable, ...processorsAndProjections(modules, listens), ...webhooksOf(modules, listens), ...workflowsOf(modules, listens) }
}
