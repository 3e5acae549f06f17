/**
 * Webhook payloads of facts with personal data: sealed on the webhooks queue and in the delivery record (the
 * fan-out seals what it built from opened data), opened only for the POST (the marker once erased).
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { Fact } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as Failure from "../failures/Failure.js"
import { KeyRing } from "../personal/KeyRing.js"
import type * as Personal from "../personal/Personal.js"
import { Registry } from "../registry/Registry.js"
import type { DeliveryItem } from "./WebhookDelivery.js"

/**
 * A webhook payload built from a fact's opened data, sealed again for the webhooks queue and the delivery record:
 * a personal field passed on unchanged takes the stored sealed value (no crypto), any other personal value is
 * sealed (KeyRing skips what is sealed or erased already). The payload keeps the fact's field names (the registry
 * checks a custom payload of a personal fact carries its subject field).
 */
export const resealed = (keyRing: KeyRing["Service"], declaration: Personal.Declaration, stored: Fact, plain: Fact, data: unknown) => {
  if (typeof data !== "object" || data === null || Array.isArray(data)) return Effect.succeed(data)
  const candidate: Record<string, unknown> = { ...(data as Record<string, unknown>) }
  for (const field of declaration.fields) {
    if (field in candidate && candidate[field] === plain.data[field]) candidate[field] = stored.data[field]
  }
  return Effect.map(keyRing.seal(stored.tenant_id, [{ declaration, value: candidate }]), (sealed) => sealed[0] as unknown)
}

/** The deliveries' payloads opened, by item key (a key store failure retries its delivery: set in `outcomes`). */
export const openDeliveries = (items: ReadonlyArray<DeliveryItem>, outcomes: Map<string, Consumer.Outcome>) =>
  Effect.gen(function*() {
    const registry = yield* Registry
    const opened = new Map<string, unknown>()
    if (!registry.hasPersonalData) return opened
    const declarationOf = (eventType: string) => {
      const event = registry.webhookEvents.get(eventType)
      return event === undefined ? undefined : registry.personalFact(event.fact.type)
    }
    const personal = items.filter(({ value }) => declarationOf(value.payload.event_type) !== undefined && typeof value.payload.payload === "object" && value.payload.payload !== null)
    // One key ring call per tenant for the batch's deliveries, not one per delivery.
    const byTenant = new Map<string, Array<DeliveryItem>>()
    for (const item of personal) byTenant.set(item.value.envelope.tenant_id, [...(byTenant.get(item.value.envelope.tenant_id) ?? []), item])
    const keyRing = yield* KeyRing
    yield* Effect.forEach([...byTenant], ([tenant, list]) =>
      Effect.map(
        Effect.result(keyRing.open(tenant, list.map(({ value }) => ({ declaration: declarationOf(value.payload.event_type)!, value: value.payload.payload as Record<string, unknown> })))),
        (r) => list.forEach(({ key }, i) => {
          if (Result.isFailure(r)) outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: r.failure.message })))
          else opened.set(key, r.success[i])
        })
      ), { concurrency: "unbounded", discard: true })
    return opened
  })
