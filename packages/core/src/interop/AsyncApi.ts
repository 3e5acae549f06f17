/**
 * The AsyncAPI 3 document of a platform, generated from the code: the five
 * queues and their dead-letter queues with their retry policies (the policy
 * table), every registered message type with a JSON Schema per
 * `schema_version` (the message definitions), every fact type (the fact
 * definitions, the platform's own included), and the webhook event catalog.
 * Served at `GET /asyncapi.json`; `npm run asyncapi` writes it to a file.
 */
import * as WorkflowInstances from "../workflows/Instances.js"
import * as Schema from "effect/Schema"
import { BatchPayload, DeadLetterRecord, Envelope, FactBatchPayload, FactPayload, WebhookPayload } from "@factline/schemas"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as Webhook from "../definitions/Webhook.js"
import type { Shape as Registry } from "../registry/Registry.js"

/** A JSON Schema (draft 2020-12) of an `effect/Schema`, with its definitions inlined under `$defs`. */
export const jsonSchema = (schema: Schema.Top): Record<string, unknown> => {
  const document = Schema.toJsonSchemaDocument(schema as never)
  const defs = document.definitions ?? {}
  return { ...(document.schema as Record<string, unknown>), ...(Object.keys(defs).length > 0 ? { $defs: defs } : {}) }
}

/**
 * A JSON Schema placed at `#/components/schemas/<name>`: its own references (`#/$defs/…`, relative to the
 * schema as a standalone document) rewritten to point into that place, since inside the AsyncAPI document
 * `#` is the document's root, not the schema's; `$schema` dropped (the document's schema format applies).
 */
const component = (name: string, schema: Record<string, unknown>): Record<string, unknown> => {
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite)
    if (typeof value !== "object" || value === null) return value
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [
      k,
      k === "$ref" && typeof v === "string" && v.startsWith("#/$defs/") ? `#/components/schemas/${name}/$defs/${v.slice("#/$defs/".length)}` : rewrite(v)
    ]))
  }
  const { $schema: _, ...rest } = schema
  return rewrite(rest) as Record<string, unknown>
}

const ref = (path: string) => ({ $ref: path })
const key = (text: string) => text.replace(/[^A-Za-z0-9._-]/g, "_")

export interface Info {
  readonly title?: string
  readonly version?: string
  readonly description?: string
}

/** The document's components as they are filled in: schemas and messages, in the order they are added. */
interface Components {
  readonly schemas: Record<string, unknown>
  readonly messages: Record<string, unknown>
}

/** A message whose payload is an envelope (`fixed`: its envelope fields' constraints), added to the components; answers its reference. */
const envelopeOf = (c: Components, name: string, title: string, payload: unknown, fixed: Record<string, unknown>, description?: string) => {
  c.messages[name] = {
    name,
    title,
    ...(description ? { description } : {}),
    contentType: "application/json",
    payload: { allOf: [ref("#/components/schemas/Envelope"), { type: "object", properties: { ...fixed, payload } }] }
  }
  return ref(`#/components/messages/${name}`)
}

/** Every message type, one message per schema_version (older versions are upcast before the handler). */
const eventMessages = (c: Components, registry: Registry) =>
  [...registry.definitions.values()].flatMap((definition) =>
    definition.versions.map((v) => {
      const id = key(`${definition.messageType}.v${v.version}`)
      c.schemas[`payload.${id}`] = component(`payload.${id}`, jsonSchema(v.schema))
      return envelopeOf(
        c,
        id,
        `${definition.messageType} (schema_version ${v.version})`,
        ref(`#/components/schemas/payload.${id}`),
        { message_type: { const: definition.messageType }, schema_version: { const: v.version } },
        `${definition.kind === "command" ? "A command" : "An event"}${v.version < definition.latestVersion ? `; upcast to version ${definition.latestVersion} before its handler runs` : ""}.`
      )
    }))

/** Every fact type (module-owned and the platform's), as the data schema of facts of that type; and the facts message. */
const factMessage = (c: Components, registry: Registry) => {
  const factTypes = [...registry.facts.entries()].sort(([a], [b]) => a.localeCompare(b))
  for (const [type, owner] of factTypes) {
    c.schemas[`fact.${key(type)}`] = { ...component(`fact.${key(type)}`, jsonSchema(owner.definition.schema)), description: `data of a ${type} fact (module ${owner.module})` }
  }
  return envelopeOf(
    c,
    "facts",
    "Facts relayed from the ledger",
    { oneOf: [ref("#/components/schemas/FactBatchPayload"), ref("#/components/schemas/FactPayload")] },
    { message_type: { enum: ["facts.batch", "fact"] } },
    `Facts of any type; each fact's data follows its type's schema: ${factTypes.map(([t]) => `#/components/schemas/fact.${key(t)}`).join(", ")}.`
  )
}

/** The webhook event catalog: what tenants' endpoints receive. */
const webhookEvents = (c: Components, registry: Registry) =>
  [...registry.webhookEvents.values()].map((event) => {
    c.schemas[`webhook.${key(event.type)}`] = component(`webhook.${key(event.type)}`, Webhook.jsonSchema(event) as Record<string, unknown>)
    return {
      type: event.type,
      fact_type: event.fact.type,
      description: event.description ?? null,
      body: { type: "object", properties: { type: { const: event.type }, timestamp: { type: "string", format: "date-time" }, data: ref(`#/components/schemas/webhook.${key(event.type)}`) } }
    }
  })

/** The messages each queue of the table carries, by purpose: a queue added to RetryPolicy fails to typecheck here until it says. */
type Carried = { readonly [P in RetryPolicy.Purpose]: ReadonlyArray<{ $ref: string }> }

/** A channel and a receive operation per queue (with the messages it carries) and per dead-letter queue; the send operation of events. */
const channelsOf = (carried: Carried, events: ReadonlyArray<{ $ref: string }>) => {
  const channels: Record<string, unknown> = {}
  const operations: Record<string, unknown> = {}
  for (const purpose of RetryPolicy.purposes) {
    const policy = RetryPolicy.byPurpose[purpose]
    const list = carried[purpose]
    channels[policy.queue] = {
      address: policy.queue,
      title: policy.queue,
      messages: Object.fromEntries(list.map((r) => [r.$ref.split("/").at(-1)!, r])),
      "x-factline-policy": {
        max_retries: policy.maxRetries,
        initial_delay_seconds: policy.initialDelaySeconds,
        max_delay_seconds: policy.maxDelaySeconds,
        max_batch_size: policy.maxBatchSize,
        max_batch_timeout_seconds: policy.maxBatchTimeoutSeconds,
        dead_letter_queue: policy.deadLetterQueue,
        producer_binding: policy.binding
      }
    }
    channels[policy.deadLetterQueue] = {
      address: policy.deadLetterQueue,
      title: `${policy.queue}'s dead letters`,
      messages: { deadLetter: ref("#/components/messages/deadLetter") }
    }
    operations[`consume-${policy.queue}`] = {
      action: "receive",
      channel: ref(`#/channels/${policy.queue}`),
      messages: list.map((r) => ref(`#/channels/${policy.queue}/messages/${r.$ref.split("/").at(-1)}`))
    }
    operations[`consume-${policy.deadLetterQueue}`] = {
      action: "receive",
      channel: ref(`#/channels/${policy.deadLetterQueue}`),
      messages: [ref(`#/channels/${policy.deadLetterQueue}/messages/deadLetter`)]
    }
  }
  operations["send-factline-events"] = {
    action: "send",
    channel: ref(`#/channels/${RetryPolicy.events.queue}`),
    summary: "Services emit events and commands (the producer, or POST /v1/events)",
    messages: events.map((r) => ref(`#/channels/${RetryPolicy.events.queue}/messages/${r.$ref.split("/").at(-1)}`))
  }
  return { channels, operations }
}

/**
 * Cloudflare Workflows as a channel (when a module declares workflows): the params an instance is started with
 * (by the fact-processing consumer, from a start fact) and the events it is sent — a waited fact under its
 * wait's event type (`wait-<name>`), and the watchdog's wake-up — with each workflow's start fact, facts
 * appended and waits listed under `x-factline-workflows`.
 */
const workflowsChannel = (c: Components, registry: Registry) => {
  const declared = [...registry.workflows.values()].sort((a, b) => a.name.localeCompare(b.name))
  if (declared.length === 0) return undefined
  const name = "factline-workflows"
  c.schemas["WorkflowParams"] = component("WorkflowParams", jsonSchema(WorkflowInstances.Params))
  c.messages["workflow.start"] = {
    name: "workflow.start",
    title: "A workflow instance's params (Cloudflare Workflows create)",
    description: `One instance per tenant, workflow and subject (id <workflow>-<32 hex>). Started by: ${declared.map((w) => `${w.name} ← ${w.factType}`).join(", ")}.`,
    contentType: "application/json",
    payload: ref("#/components/schemas/WorkflowParams")
  }
  const waits = declared.flatMap((w) => Object.entries(w.waitsFor as Record<string, ReadonlyArray<{ readonly type: string }>>).map(([wait, facts]) => ({ workflow: w.name, wait, facts: facts.map((f) => f.type) })))
  for (const { workflow, wait, facts } of waits) {
    c.messages[`workflow.wait.${key(workflow)}.${key(wait)}`] = {
      name: WorkflowInstances.eventType(wait),
      title: `${workflow}: the fact its wait ${wait} receives (sendEvent type ${WorkflowInstances.eventType(wait)})`,
      contentType: "application/json",
      payload: { allOf: [ref("#/components/schemas/FactPayload")], description: `A fact of ${facts.join(" | ")}` }
    }
  }
  c.messages["workflow.wake"] = {
    name: WorkflowInstances.wakeType,
    title: "The watchdog's wake-up of an overdue instance (no payload; no wait receives it)",
    contentType: "application/json",
    payload: { type: "null" }
  }
  const eventRefs = [...waits.map((w) => `workflow.wait.${key(w.workflow)}.${key(w.wait)}`), "workflow.wake"]
  return {
    name,
    channel: {
      address: "FACTLINE_WORKFLOWS",
      title: "Cloudflare Workflows (class FactlineWorkflow)",
      messages: Object.fromEntries(["workflow.start", ...eventRefs].map((m) => [m, ref(`#/components/messages/${m}`)])),
      "x-factline-workflows": declared.map((w) => ({
        name: w.name,
        start: w.factType,
        appends: (w.emits as ReadonlyArray<{ readonly type: string }>).map((f) => f.type),
        waits: Object.fromEntries(Object.entries(w.waitsFor as Record<string, ReadonlyArray<{ readonly type: string }>>).map(([wait, facts]) => [wait, facts.map((f) => f.type)])),
        retry: w.retry
      }))
    },
    start: { action: "send", channel: ref(`#/channels/${name}`), summary: "The fact-processing consumer starts an instance from a start fact", messages: [ref(`#/channels/${name}/messages/workflow.start`)] },
    deliver: { action: "send", channel: ref(`#/channels/${name}`), summary: "Facts delivered to waiting instances; the watchdog's wake-up", messages: eventRefs.map((m) => ref(`#/channels/${name}/messages/${m}`)) }
  }
}

export const generate = (registry: Registry, info: Info = {}) => {
  const c: Components = { schemas: {}, messages: {} }
  const platformSchemas = { Envelope, FactBatchPayload, FactPayload, WebhookPayload, BatchPayload, DeadLetterRecord }
  for (const [name, schema] of Object.entries(platformSchemas)) c.schemas[name] = component(name, jsonSchema(schema))
  const events = eventMessages(c, registry)
  const facts = factMessage(c, registry)
  const deliveryMessage = envelopeOf(c, "webhook.delivery", "One webhook delivery (fact × endpoint)", ref("#/components/schemas/WebhookPayload"), { message_type: { const: "webhook.delivery" } })
  const batchMessage = envelopeOf(c, "batch", "One slice of a bulk operation", ref("#/components/schemas/BatchPayload"), { message_type: { pattern: "^batch\\." } })
  c.messages["deadLetter"] = { name: "deadLetter", title: "A dead-letter record", contentType: "application/json", payload: ref("#/components/schemas/DeadLetterRecord") }
  const webhooks = webhookEvents(c, registry)
  const carried: Carried = {
    events,
    projections: [facts],
    factProcessing: [facts],
    webhooks: [facts, deliveryMessage],
    batch: [batchMessage]
  }
  const { channels, operations } = channelsOf(carried, events)
  const workflows = workflowsChannel(c, registry)
  if (workflows !== undefined) {
    channels[workflows.name] = workflows.channel
    operations[`start-${workflows.name}`] = workflows.start
    operations[`deliver-${workflows.name}`] = workflows.deliver
  }

  return {
    asyncapi: "3.0.0",
    info: {
      title: info.title ?? "factline platform",
      version: info.version ?? "0.1.0",
      description: info.description ?? "The queues of a factline platform on Cloudflare Queues, generated from its registry and policy table."
    },
    defaultContentType: "application/json",
    channels,
    operations,
    components: { schemas: c.schemas, messages: c.messages },
    "x-factline-webhook-events": webhooks
  }
}
