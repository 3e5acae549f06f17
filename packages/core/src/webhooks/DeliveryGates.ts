/**
 * What stands between a delivery and its POST, checked per batch before anything is sent: its tenant's hold
 * (TenantHolds: a held tenant's deliveries go back on the queue until the hold ends), its endpoint's host name
 * (resolved once per batch; an answer the URL guard refuses fails the delivery, a resolver that does not answer
 * retries it) and its endpoint's limits (EndpointLimiter: a delivery not granted now is parked). The POSTs and
 * what they record are WebhookConsumer's and DeliveryOutcomes'.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { type Envelope, tenantKey } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as Failure from "../failures/Failure.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import { Queues } from "../platform/Queues.js"
import * as Time from "../platform/Time.js"
import * as EndpointLimiter from "./EndpointLimiter.js"
import { EndpointLimits } from "./EndpointLimits.js"
import { Resolver } from "./Resolver.js"
import * as TenantHolds from "./TenantHolds.js"
import * as UrlGuard from "./UrlGuard.js"
import type { DeliveryItem } from "./WebhookDelivery.js"
import type { EndpointConfig, RecordBatch } from "./WebhookStore.js"

/** Per isolate: which tenants are held back (see TenantHolds). */
export const holds = TenantHolds.make()

/** A delivery's state as the store answers it. */
export type DeliveryStates = ReadonlyMap<string, { readonly status: string; readonly attempts: number }>

/**
 * A held tenant's deliveries never attempted go back on the queue until its hold ends (no retry spent): one send
 * per delay, each acked once on the queue. Answers the deliveries to attempt now.
 */
export const deferHeld = (items: ReadonlyArray<DeliveryItem>, states: DeliveryStates, nowMs: number, outcomes: Map<string, Consumer.Outcome>) =>
  Effect.gen(function*() {
    const deferred = new Map<number, Array<{ key: string; body: Envelope }>>()
    const now = items.filter(({ key, value }) => {
      const until = holds.heldUntil(value.envelope.tenant_id, nowMs)
      const state = states.get(tenantKey(value.envelope.tenant_id, value.payload.delivery_id))
      if (until === undefined || state !== undefined || value.attempts > 1) return true
      const delaySeconds = Math.max(1, Math.ceil((until - nowMs) / 1000))
      deferred.set(delaySeconds, [...(deferred.get(delaySeconds) ?? []), { key, body: value.envelope }])
      return false
    })
    if (deferred.size > 0) {
      const queues = yield* Queues
      for (const [delaySeconds, group] of deferred) {
        const sent = yield* Effect.result(queues.send(RetryPolicy.webhooks.queue, group.map((d) => d.body), { delaySeconds }))
        const onQueue = Result.isFailure(sent) ? sent.failure.sent : group.length
        group.forEach((d, i) =>
          outcomes.set(d.key, i < onQueue ? Consumer.done : Consumer.failed(new Failure.TransientError({ message: `could not put a held delivery back on the queue: ${Result.isFailure(sent) ? sent.failure.message : ""}` }))))
      }
    }
    return now
  })

/** What each endpoint host name resolves to: the rule a refused answer breaks (or undefined), or why the resolver did not answer. */
export type HostVerdict = { readonly refused: string | undefined } | { readonly unavailable: string }

/** Resolves each distinct host name once per batch (the resolver caches across batches); IP literals were checked when registered. */
export const resolveHosts = (urls: ReadonlyArray<string>, localDevelopment: boolean) =>
  Effect.gen(function*() {
    const resolver = yield* Resolver
    const hosts = new Set(urls.map((url) => UrlGuard.hostOf(new URL(url))).filter((host) => !UrlGuard.isAddress(host)))
    const verdicts = new Map<string, HostVerdict>()
    yield* Effect.forEach(hosts, (host) =>
      Effect.map(Effect.result(resolver.resolve(host)), (answer) => {
        if (Result.isFailure(answer)) return void verdicts.set(host, { unavailable: answer.failure.message })
        const guard = { localDevelopment }
        const refused = answer.success.flatMap((address) => {
          const rule = UrlGuard.addressRule(address, guard)
          return rule === undefined ? [] : [`${host} resolves to ${address}: ${rule}`]
        })
        verdicts.set(host, { refused: refused[0] })
      }), { concurrency: "unbounded", discard: true })
    return verdicts
  })

const describeLimits = (limits: EndpointLimiter.Limits) =>
  [limits.maxPerSecond === null ? [] : [`${limits.maxPerSecond}/s`], limits.maxInFlight === null ? [] : [`${limits.maxInFlight} in flight`]].flat().join(", ")

/**
 * The endpoints with limits (`max_per_second`, `max_in_flight`): one call to each one's limiter (its Durable
 * Object) for the deliveries about to be POSTed — none for an endpoint without limits. A delivery not granted
 * now is parked: sent again after the limiter's wait and acked, so it spends no attempt and is never
 * dead-lettered for it (same body, same `webhook-id`); the endpoint's attempts list it as `throttled`. A
 * limiter that does not answer retries its deliveries (never sent unchecked). Answers the keys held back and
 * the leases to release once the POSTs are over.
 */
export const throttle = (
  items: ReadonlyArray<DeliveryItem>,
  configs: ReadonlyMap<string, ReadonlyArray<EndpointConfig>>,
  states: DeliveryStates,
  verdicts: ReadonlyMap<string, HostVerdict>,
  record: { readonly attempts: Array<RecordBatch["attempts"][number]> },
  outcomes: Map<string, Consumer.Outcome>
) =>
  Effect.gen(function*() {
    const held = new Set<string>()
    const leases: Array<{ readonly tenant_id: string; readonly endpoint_id: string; readonly ids: ReadonlyArray<string> }> = []
    const byEndpoint = new Map<string, { endpoint: EndpointConfig; limits: EndpointLimiter.Limits; items: Array<DeliveryItem> }>()
    for (const item of items) {
      const { envelope, payload } = item.value
      if (states.get(tenantKey(envelope.tenant_id, payload.delivery_id))?.status === "succeeded") continue
      const endpoint = (configs.get(envelope.tenant_id) ?? []).find((e) => e.id === payload.webhook_config_id)
      const limits = endpoint?.enabled ? EndpointLimiter.limits(endpoint) : undefined
      if (endpoint === undefined || limits === undefined) continue
      const verdict = verdicts.get(UrlGuard.hostOf(new URL(endpoint.url)))
      if (verdict !== undefined && ("unavailable" in verdict || verdict.refused !== undefined)) continue
      const k = tenantKey(envelope.tenant_id, endpoint.id)
      const entry = byEndpoint.get(k) ?? { endpoint, limits, items: [] }
      entry.items.push(item)
      byEndpoint.set(k, entry)
    }
    if (byEndpoint.size === 0) return { held, leases }
    const limiter = yield* EndpointLimits
    yield* Effect.forEach(byEndpoint.values(), ({ endpoint, limits, items: asked }) =>
      Effect.gen(function*() {
        const answer = yield* Effect.result(limiter.acquire(endpoint.tenant_id, endpoint.id, limits, asked.map((i) => i.value.payload.delivery_id)))
        if (Result.isFailure(answer)) {
          for (const { key } of asked) {
            held.add(key)
            outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: `delivery to endpoint ${endpoint.id} not attempted: ${answer.failure.message}` })))
          }
          return
        }
        leases.push({ tenant_id: endpoint.tenant_id, endpoint_id: endpoint.id, ids: answer.success.granted })
        const waits = new Map(answer.success.waits.map((w) => [w.id, w.ms]))
        const at = yield* Time.now
        for (const { key, value: { envelope, payload } } of asked) {
          const ms = waits.get(payload.delivery_id)
          if (ms === undefined) continue
          const seconds = Math.max(1, Math.ceil(ms / 1000))
          const message = `throttled: over the endpoint's limit (${describeLimits(limits)}); nothing sent, sent again in ${seconds} s`
          held.add(key)
          record.attempts.push({
            tenant_id: envelope.tenant_id, endpoint_id: endpoint.id, attempted_at: at, delivery_id: payload.delivery_id,
            attempt: states.get(tenantKey(envelope.tenant_id, payload.delivery_id))?.attempts ?? 0, event_type: payload.event_type, fact_id: payload.fact_id,
            succeeded: false, status_code: null, duration_ms: 0, response_snippet: null, error: message, throttled: true
          })
          outcomes.set(key, Consumer.failed(new Failure.Unavailable({ service: "the endpoint's rate limit", message: `delivery to endpoint ${endpoint.id} ${message}`, parkSeconds: seconds })))
        }
      }), { concurrency: "unbounded", discard: true })
    return { held, leases }
  })
