/**
 * The webhook event catalog, in code: which facts a module publishes to
 * tenants' endpoints, under which event type, with which payload.
 *
 * ```ts
 * Webhook.event(Charge, { type: "charge.created" })                      // the fact's data as the payload
 * Webhook.event(Charge, { type: "charge.created", schema: ChargeCreated,  // or a payload of its own
 *   payload: (data, fact) => ({ id: fact.fact_id, amount: data.amount_cents }) })
 * ```
 *
 * Typed by the fact definition; only catalog event types can be subscribed,
 * and `GET /v1/webhooks/event-types` lists them with a JSON Schema of each
 * payload (generated from `schema`). Delivery is the webhooks capability's job.
 */
import * as Schema from "effect/Schema"
import type * as FactDefinition from "./FactDefinition.js"
import * as Naming from "./Naming.js"

export interface WebhookEvent<T extends string = string, D = any, P = unknown> {
  readonly _tag: "WebhookEvent"
  /** The event type endpoints subscribe to: `charge.created`. */
  readonly type: string
  readonly description: string | undefined
  readonly fact: FactDefinition.FactDefinition<T, D>
  /** The payload's schema (for the JSON Schema in the catalog). */
  readonly schema: Schema.Top
  readonly payload: (data: D, fact: FactDefinition.StoredFact<T, D>) => P
}

export type Any = WebhookEvent<any, any, any>

export function event<T extends string, D>(
  fact: FactDefinition.FactDefinition<T, D>,
  options: { readonly type: string; readonly description?: string }
): WebhookEvent<T, D, D>
export function event<T extends string, D, S extends Schema.Top>(
  fact: FactDefinition.FactDefinition<T, D>,
  options: {
    readonly type: string
    readonly description?: string
    readonly schema: S
    readonly payload: (data: D, fact: FactDefinition.StoredFact<T, D>) => S["Type"]
  }
): WebhookEvent<T, D, S["Type"]>
export function event(
  fact: FactDefinition.Any,
  options: { readonly type: string; readonly description?: string; readonly schema?: Schema.Top; readonly payload?: (data: any, fact: any) => unknown }
): Any {
  Naming.check("webhook event type", options.type)
  return {
    _tag: "WebhookEvent",
    type: options.type,
    description: options.description,
    fact,
    schema: options.schema ?? fact.schema,
    payload: options.payload ?? ((data) => data)
  }
}

/** The JSON Schema (draft 2020-12) of an event's payload. */
export const jsonSchema = (event: Any): Record<string, unknown> => {
  const document = Schema.toJsonSchemaDocument(event.schema as never)
  return { $schema: "https://json-schema.org/draft/2020-12/schema", ...(document.schema as object), ...(Object.keys(document.definitions ?? {}).length > 0 ? { $defs: document.definitions } : {}) }
}
