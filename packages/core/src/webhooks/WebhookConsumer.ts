/**
 * The consumer of `factline-webhooks`: facts of published types in, signed
 * deliveries out. Two kinds of messages share the queue (and its policy):
 *
 * - **fact messages** (relayed like to the other fact queues): each fact of a
 *   catalog type is matched against its tenant's enabled endpoints that
 *   existed when the fact was appended (`existedAt`: a fact recovered later
 *   never reaches an endpoint created since; configs cached per isolate: no
 *   D1 round trip per fact) and fanned out into one
 *   `webhook.delivery` message per (fact, endpoint), sent back to this queue.
 *   The delivery id is deterministic (fact id + endpoint id): the
 *   `webhook-id` of every attempt and the idempotency key. The payload is
 *   built from the fact's latest shape (older `schema_version`s upcast); a
 *   fact newer than the code is dead-lettered, nothing sent.
 * - **delivery messages**: POSTed per Standard Webhooks (signed with the
 *   endpoint's secret, and the previous one during a rotation), 15 s timeout,
 *   no redirects; 2xx succeeds. The endpoint's host name is resolved first
 *   (`Resolver`, once per name per batch, cached per isolate): an answer in a
 *   range the URL guard refuses fails the delivery at once, nothing sent (an
 *   attempt recorded with the reason, `webhook_failed`, the DLQ); a resolver
 *   that does not answer retries the delivery, never sends it unchecked. Any other answer is retried with the queue's
 *   policy (a `Retry-After` on 429/503 waits at least that long, up to the
 *   policy's maximum); `410 Gone` disables the endpoint at once; an endpoint
 *   failing every delivery for the disable period is disabled. A delivery
 *   already recorded as succeeded is not sent again (a redelivery). A
 *   delivery naming an endpoint the cached configs do not know has its
 *   tenant's configs read again before it is taken for deleted. The
 *   platform's alerts (operations/Alerts.ts) send delivery messages of
 *   their own (`deliveryMessage`), delivered the same way.
 *
 * Per batch: one read of the delivery states, one transaction recording every
 * attempt (log, delivery state, endpoint health) and — at the same time, not
 * after it — one ledger append of the outcome facts (`webhook_sent`,
 * `webhook_failed`, caused by the triggering fact), then their relay — constant
 * in batch size. An endpoint the record disabled adds one append of its
 * `webhook_endpoint_disabled` fact.
 *
 * Tenant isolation (`TenantHolds`): a tenant whose deliveries held a batch
 * for a second or more is held for as long after it; its deliveries not yet
 * attempted are re-sent to the queue with that delay instead of POSTed, so
 * its slow endpoints cannot stall the batches that carry other tenants'.
 *
 * Trace context: a delivery message carries the triggering fact's trace (a new
 * parent-id for the fan-out); each attempt POSTs a `traceparent` header with a
 * new parent-id of its own, and the outcome facts of an attempt carry that
 * header's value — so a receiver's trace, the fact that caused the delivery
 * and the `webhook_sent` that recorded it share one trace id.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { Envelope, type Fact, Issues, TraceContext, type WebhookPayload, WebhookPayload as WebhookPayloadSchema, tenantKey } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as Failure from "../failures/Failure.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import type * as FactDefinition from "../definitions/FactDefinition.js"
import * as PlatformFacts from "../definitions/PlatformFacts.js"
import * as FactId from "../ledger/FactId.js"
import { Ledger } from "../ledger/Ledger.js"
import type { AppendGroup, FactDraft } from "../ledger/LedgerProtocol.js"
import { Queues } from "../platform/Queues.js"
import * as SendBatches from "../platform/SendBatches.js"
import * as FactMessage from "../relay/FactMessage.js"
import { relayFor } from "../relay/FactRelay.js"
import { Registry } from "../registry/Registry.js"
import * as EndpointLimiter from "./EndpointLimiter.js"
import { EndpointLimits } from "./EndpointLimits.js"
import { Resolver } from "./Resolver.js"
import * as Signing from "./Signing.js"
import * as TenantHolds from "./TenantHolds.js"
import { type EndpointConfig, type RecordBatch, WebhookStore } from "./WebhookStore.js"
import * as UrlGuard from "./UrlGuard.js"
import { WebhookTransport } from "./WebhookTransport.js"
import * as Telemetry from "../platform/Telemetry.js"
import * as Time from "../platform/Time.js"

export const deliveryMessageType = "webhook.delivery"
export const source = "factline-webhooks"
/** An endpoint failing every delivery for this long is disabled (Svix: 5 days). */
export const defaultDisableAfterMs = 5 * 24 * 3600 * 1000
/** A delivery message must fit a queue message with room to spare. */
export const maxDeliveryBytes = 100 * 1024

export interface Options {
  /** `FACTLINE_LOCAL_DEVELOPMENT`: loopback answers of the resolver are allowed (as loopback URLs are). */
  readonly localDevelopment?: boolean
  readonly delayScale?: number
  readonly log?: Consumer.LogLevel
  readonly runs?: Consumer.Options["runs"]
  readonly disableAfterMs?: number
}

type Item =
  | { readonly kind: "fact"; readonly fact: Fact; readonly replayed: boolean }
  | { readonly kind: "delivery"; readonly envelope: Envelope; readonly payload: WebhookPayload; readonly attempts: number; readonly last: boolean }

const decodeEnvelope = Issues.decodeStrict(Envelope)
const decodePayload = Issues.decodeStrict(WebhookPayloadSchema)

const isDelivery = (body: unknown) =>
  typeof body === "object" && body !== null && (body as { message_type?: unknown }).message_type === deliveryMessageType

export const decode = (body: unknown, delivery: Consumer.Delivery) => {
  if (!isDelivery(body)) {
    return Effect.map(FactMessage.decode(body), (items) =>
      items.map(({ key, value }) => ({ key, value: { kind: "fact", fact: value.fact, replayed: value.replayed === true } as Item })))
  }
  const envelope = decodeEnvelope(body)
  if (Result.isFailure(envelope)) return Effect.fail(new Failure.PermanentError({ reason: "decode_error", message: Issues.render(envelope.failure) }))
  const payload = decodePayload(envelope.success.payload, ["payload"])
  if (Result.isFailure(payload)) return Effect.fail(new Failure.PermanentError({ reason: "decode_error", message: Issues.render(payload.failure) }))
  return Effect.succeed([{
    key: tenantKey(envelope.success.tenant_id, payload.success.delivery_id),
    value: { kind: "delivery", envelope: envelope.success, payload: payload.success, attempts: delivery.attempts, last: delivery.last } as Item
  }])
}

const hex = (bytes: ArrayBuffer) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("")

/** The delivery id of a fact to an endpoint: deterministic, so every attempt and every fan-out agree. */
export const deliveryId = async (factId: string, endpointId: string) =>
  `wd_${hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${factId}\u0000${endpointId}`))).slice(0, 32)}`

/** The body every attempt of a delivery sends (fixed: the fact's time, not the attempt's). */
export const body = (payload: WebhookPayload) => JSON.stringify({ type: payload.event_type, timestamp: payload.occurred_at, data: payload.payload })

/**
 * The delivery message of one event to one endpoint: what the fan-out sends for a fact, and what the platform's
 * alerts (operations/Alerts.ts) send for an alert — the delivery id (`webhook-id`) derived from the fact's id.
 */
export const deliveryMessage = async (input: {
  readonly fact: Pick<Fact, "fact_id" | "type" | "stream" | "tenant_id" | "correlation_id" | "created_at" | "traceparent">
  readonly endpoint: Pick<EndpointConfig, "id" | "version">
  readonly eventType: string
  readonly data: unknown
  readonly now: string
  /** Telemetry.sender: the fanning-out span as the delivery's parent when exported. */
  readonly sender?: (traceparent: string | undefined) => string | undefined
}): Promise<Envelope> => {
  const { fact, endpoint } = input
  const id = await deliveryId(fact.fact_id, endpoint.id)
  const payload: WebhookPayload = {
    delivery_id: id,
    webhook_config_id: endpoint.id,
    webhook_config_version: endpoint.version,
    fact_id: fact.fact_id,
    fact_type: fact.type,
    fact_stream: fact.stream,
    event_type: input.eventType,
    occurred_at: fact.created_at,
    payload: input.data
  }
  return {
    schema_version: 1,
    message_type: deliveryMessageType,
    message_id: `msg_${id}`,
    idempotency_key: id,
    correlation_id: fact.correlation_id,
    causation_id: fact.fact_id,
    tenant_id: fact.tenant_id,
    subject: endpoint.id,
    source,
    created_at: input.now,
    payload,
    traceparent: input.sender?.(fact.traceparent) ?? TraceContext.child(fact.traceparent)
  }
}

/**
 * Whether the endpoint existed when the fact was appended (its `created_at`, the time it was decided and
 * appended): only those receive it. A fact relayed again later — `POST /v1/recover`, an outbox's late relay —
 * is not delivered to endpoints created since, which never subscribed to it.
 */
export const existedAt = (endpoint: Pick<EndpointConfig, "created_at">, fact: Pick<Fact, "created_at">) =>
  Date.parse(endpoint.created_at) <= Date.parse(fact.created_at)

const fanOut = (items: ReadonlyArray<{ key: string; value: Extract<Item, { kind: "fact" }> }>, configs: ReadonlyMap<string, ReadonlyArray<EndpointConfig>>, outcomes: Map<string, Consumer.Outcome>, now: string) =>
  Effect.gen(function*() {
    const registry = yield* Registry
    const queues = yield* Queues
    const sender = yield* Telemetry.sender
    const out: Array<{ key: string; body: Envelope }> = []
    for (const { key, value } of items) {
      const events = value.replayed ? [] : registry.webhooksFor(value.fact.type)
      const endpoints = (configs.get(value.fact.tenant_id) ?? []).filter((e) => e.enabled && existedAt(e, value.fact))
      // Payloads are built from the fact's latest shape; one newer than the code is refused (dead-lettered), never sent.
      const current = events.length === 0 || endpoints.length === 0 ? Result.succeed(value.fact) : registry.latest(value.fact)
      if (Result.isFailure(current)) {
        outcomes.set(key, Consumer.failed(current.failure))
        continue
      }
      const fact = current.success
      let failed: string | undefined
      for (const event of events) {
        const subscribed = endpoints.filter((e) => e.event_types.includes(event.type))
        if (subscribed.length === 0) continue
        let data: unknown
        try {
          data = event.payload(fact.data, fact as FactDefinition.StoredFact)
        } catch (error) {
          failed = `webhook event ${event.type} failed to build its payload from fact ${fact.fact_id}: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`
          break
        }
        for (const endpoint of subscribed) {
          const envelope = yield* Effect.promise(() => deliveryMessage({ fact, endpoint, eventType: event.type, data, now, sender }))
          if (SendBatches.sizeOf(envelope) > maxDeliveryBytes) {
            failed = `webhook event ${event.type} of fact ${fact.fact_id} is over ${maxDeliveryBytes / 1024} KiB; publish a smaller payload`
            break
          }
          out.push({ key, body: envelope })
        }
        if (failed) break
      }
      outcomes.set(key, failed ? Consumer.failed(new Failure.PermanentError({ reason: "permanent_failure", message: failed })) : Consumer.done)
    }
    // The messages the door did not send (those after the failed call) retry their facts.
    const sent = yield* Effect.result(queues.send(RetryPolicy.webhooks.queue, out.map((o) => o.body)))
    if (Result.isFailure(sent)) {
      for (const o of out.slice(sent.failure.sent)) outcomes.set(o.key, Consumer.failed(new Failure.TransientError({ message: `could not enqueue deliveries: ${sent.failure.message}` })))
    }
  })

/** The POSTs a delivery gets: the queue's first delivery and its retries. */
const maxAttempts = RetryPolicy.webhooks.maxRetries + 1

type DeliveryItem = { readonly key: string; readonly value: Extract<Item, { kind: "delivery" }> }

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
const throttle = (
  items: ReadonlyArray<DeliveryItem>,
  configs: ReadonlyMap<string, ReadonlyArray<EndpointConfig>>,
  states: ReadonlyMap<string, { readonly status: string; readonly attempts: number }>,
  verdicts: ReadonlyMap<string, Verdict>,
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

interface Attempted {
  readonly key: string
  readonly item: Extract<Item, { kind: "delivery" }>
  readonly endpoint: EndpointConfig
  readonly attempt: number
  readonly status: number | null
  readonly retryAfterSeconds: number | undefined
  readonly snippet: string
  readonly durationMs: number
  readonly attemptedAt: string
  /** The `traceparent` header of this attempt (the delivery's trace, a new parent-id). */
  readonly traceparent: string
  /** Why nothing was sent: the host resolved to a refused address (the delivery fails at once). */
  readonly refused?: string
}

/** Per isolate: which tenants are held back (see TenantHolds). */
const holds = TenantHolds.make()

const truncate = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s)

/** What each endpoint host name resolves to: the rule a refused answer breaks (or undefined), or why the resolver did not answer. */
type Verdict = { readonly refused: string | undefined } | { readonly unavailable: string }

/** Resolves each distinct host name once per batch (the resolver caches across batches); IP literals were checked when registered. */
const resolveHosts = (urls: ReadonlyArray<string>, options: Options) =>
  Effect.gen(function*() {
    const resolver = yield* Resolver
    const hosts = new Set(urls.map((url) => UrlGuard.hostOf(new URL(url))).filter((host) => !UrlGuard.isAddress(host)))
    const verdicts = new Map<string, Verdict>()
    yield* Effect.forEach(hosts, (host) =>
      Effect.map(Effect.result(resolver.resolve(host)), (answer) => {
        if (Result.isFailure(answer)) return void verdicts.set(host, { unavailable: answer.failure.message })
        const guard = { localDevelopment: options.localDevelopment === true }
        const refused = answer.success.flatMap((address) => {
          const rule = UrlGuard.addressRule(address, guard)
          return rule === undefined ? [] : [`${host} resolves to ${address}: ${rule}`]
        })
        verdicts.set(host, { refused: refused[0] })
      }), { concurrency: "unbounded", discard: true })
    return verdicts
  })

const deliver = (items: ReadonlyArray<{ key: string; value: Extract<Item, { kind: "delivery" }> }>, configs: ReadonlyMap<string, ReadonlyArray<EndpointConfig>>, outcomes: Map<string, Consumer.Outcome>, options: Options) =>
  Effect.gen(function*() {
    if (items.length === 0) return
    const store = yield* WebhookStore
    const transport = yield* WebhookTransport
    const ledger = yield* Ledger
    const limiter = yield* EndpointLimits
    const sender = yield* Telemetry.sender
    const states = yield* Effect.result(store.deliveryStates(items.map(({ value }) => ({ tenant_id: value.envelope.tenant_id, delivery_id: value.payload.delivery_id }))))
    if (Result.isFailure(states)) {
      for (const { key } of items) outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: `delivery states unavailable: ${states.failure.message}` })))
      return
    }
    const nowMs = yield* Clock.currentTimeMillis
    const record: { -readonly [K in keyof RecordBatch]: RecordBatch[K] extends ReadonlyArray<infer T> ? Array<T> : RecordBatch[K] } = { attempts: [], deliveries: [], endpoints: [], now: new Date(nowMs).toISOString() }
    const attempted: Array<Attempted> = []
    // A held tenant's deliveries never attempted go back on the queue until its hold ends (no retry spent).
    const deferred = new Map<number, Array<{ key: string; body: Envelope }>>()
    const now = items.filter(({ key, value }) => {
      const until = holds.heldUntil(value.envelope.tenant_id, nowMs)
      const state = states.success.get(tenantKey(value.envelope.tenant_id, value.payload.delivery_id))
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
    const toSend = now.flatMap(({ value }) => (configs.get(value.envelope.tenant_id) ?? []).filter((e) => e.enabled && e.id === value.payload.webhook_config_id))
    const verdicts = yield* resolveHosts(toSend.map((e) => e.url), options)
    // Endpoints with limits: their deliveries the limiter does not grant now are parked (not POSTed).
    const limited = yield* throttle(now, configs, states.success, verdicts, record, outcomes)
    yield* Effect.forEach(now.filter(({ key }) => !limited.held.has(key)), ({ key, value }) =>
      Effect.gen(function*() {
        const { payload, envelope } = value
        const tenant = envelope.tenant_id
        const state = states.success.get(tenantKey(tenant, payload.delivery_id))
        if (state?.status === "succeeded") return void outcomes.set(key, Consumer.done)
        const endpoint = (configs.get(tenant) ?? []).find((e) => e.id === payload.webhook_config_id)
        if (endpoint === undefined || !endpoint.enabled) {
          // Deleted or disabled since the fan-out: nothing is sent; the delivery is kept as skipped (recoverable once enabled).
          record.deliveries.push({
            tenant_id: tenant, delivery_id: payload.delivery_id, endpoint_id: payload.webhook_config_id, fact_id: payload.fact_id, event_type: payload.event_type,
            status: endpoint === undefined ? "skipped" : "failed", attempts: state?.attempts ?? 0, last_status_code: null, last_attempted_at: record.now, message: envelope
          })
          return void outcomes.set(key, Consumer.done)
        }
        const verdict = verdicts.get(UrlGuard.hostOf(new URL(endpoint.url)))
        if (verdict !== undefined && "unavailable" in verdict) {
          // Never sent unchecked: retried with the queue's policy until the resolver answers.
          return void outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: `delivery to endpoint ${endpoint.id} not attempted: its host could not be resolved (${verdict.unavailable})` })))
        }
        if (verdict?.refused !== undefined) {
          const traceparent = TraceContext.child(envelope.traceparent)
          const refused = `refused, nothing sent: ${verdict.refused}`
          return void attempted.push({ key, item: value, endpoint, attempt: (state?.attempts ?? 0) + 1, status: null, retryAfterSeconds: undefined, snippet: refused, durationMs: 0, attemptedAt: yield* Time.now, traceparent, refused })
        }
        const text = body(payload)
        const timestamp = Math.floor((yield* Time.millis) / 1000)
        const signed = yield* Effect.promise(() => Signing.headers(endpoint.secrets, payload.delivery_id, timestamp, text))
        const traceparent = sender(envelope.traceparent) ?? TraceContext.child(envelope.traceparent)
        const response = yield* transport.post(endpoint.url, { ...signed, traceparent }, text)
        attempted.push({ key, item: value, endpoint, attempt: (state?.attempts ?? 0) + 1, ...response, attemptedAt: yield* Time.now, traceparent })
      }), { concurrency: "unbounded", discard: true })
    // The POSTs are over: their slots go back (a release that fails is logged; the leases expire by themselves).
    yield* Effect.forEach(limited.leases, (l) =>
      Effect.catch(limiter.release(l.tenant_id, l.endpoint_id, l.ids), (e) => Effect.logWarning(`endpoint ${l.endpoint_id}'s rate limit slots not released (they expire in ${EndpointLimiter.leaseMs / 1000} s): ${e.message}`)), { concurrency: "unbounded", discard: true })

    const slowest = new Map<string, number>()
    for (const a of attempted) slowest.set(a.item.envelope.tenant_id, Math.max(slowest.get(a.item.envelope.tenant_id) ?? 0, a.durationMs))
    const afterMs = yield* Clock.currentTimeMillis
    for (const [tenant, ms] of slowest) holds.observe(tenant, ms, afterMs)

    const disableAfter = options.disableAfterMs ?? defaultDisableAfterMs
    const health = new Map<string, { tenant_id: string; endpoint_id: string; succeeded: boolean; disable?: string }>()
    const newFacts: Array<{ tenant_id: string; stream: string; draft: Promise<FactDraft> }> = []
    const outcomeFact = (a: Attempted, definition: FactDefinition.Any, data: Record<string, unknown>, suffix: string) => {
      const { payload, envelope } = a.item
      newFacts.push({
        tenant_id: envelope.tenant_id,
        stream: payload.fact_stream,
        draft: FactId.make({ tenantId: envelope.tenant_id, cause: `${payload.delivery_id}:${suffix}`, decidedBy: source, position: 0 }).then((fact_id) => ({
          fact_id, type: definition.type, data, causation_id: payload.fact_id, correlation_id: envelope.correlation_id, caused_by: source, created_at: a.attemptedAt,
          traceparent: a.traceparent
        }))
      })
    }
    for (const a of attempted) {
      const { payload, envelope } = a.item
      const tenant = envelope.tenant_id
      const ok = a.status !== null && a.status >= 200 && a.status < 300
      const gone = a.status === 410
      // A delivery's budget is its POSTs (a throttled delivery was sent again as a new message, its queue count anew).
      const spent = !a.item.last && a.attempt >= maxAttempts
      const last = a.item.last || spent || gone || a.refused !== undefined
      const describe = a.status === null ? a.snippet : `HTTP ${a.status}${a.status >= 300 && a.status < 400 ? " (redirects are not followed)" : ""}: ${truncate(a.snippet, 200)}`
      record.attempts.push({
        tenant_id: tenant, endpoint_id: a.endpoint.id, attempted_at: a.attemptedAt, delivery_id: payload.delivery_id, attempt: a.attempt, event_type: payload.event_type,
        fact_id: payload.fact_id, succeeded: ok, status_code: a.status, duration_ms: a.durationMs, response_snippet: a.status === null ? null : a.snippet, error: ok ? null : describe, throttled: false
      })
      record.deliveries.push({
        tenant_id: tenant, delivery_id: payload.delivery_id, endpoint_id: a.endpoint.id, fact_id: payload.fact_id, event_type: payload.event_type,
        status: ok ? "succeeded" : last ? "failed" : "failing", attempts: a.attempt, last_status_code: a.status, last_attempted_at: a.attemptedAt, message: envelope
      })
      const endpointKey = tenantKey(tenant, a.endpoint.id)
      const h = health.get(endpointKey) ?? { tenant_id: tenant, endpoint_id: a.endpoint.id, succeeded: false }
      if (ok) h.succeeded = true
      else if (gone) h.disable = "the endpoint answered 410 Gone"
      else if (!h.succeeded && a.endpoint.failing_since !== null && nowMs - Date.parse(a.endpoint.failing_since) >= disableAfter) {
        h.disable = `every delivery failed since ${a.endpoint.failing_since}`
      }
      health.set(endpointKey, h)
      const delivery = { delivery_id: payload.delivery_id, endpoint_id: a.endpoint.id, event_type: payload.event_type, attempt: a.attempt }
      if (ok) {
        outcomeFact(a, PlatformFacts.WebhookSent, { ...delivery, status_code: a.status!, duration_ms: a.durationMs }, `sent:${a.attempt}`)
        outcomes.set(a.key, Consumer.done)
      } else {
        if (last) outcomeFact(a, PlatformFacts.WebhookFailed, { ...delivery, status_code: a.status, error: describe }, `failed:${a.attempt}`)
        outcomes.set(
          a.key,
          gone
            ? Consumer.failed(new Failure.PermanentError({ reason: "permanent_failure", message: `${describe} — endpoint ${a.endpoint.id} disabled, nothing more is sent to it` }))
            : a.refused !== undefined
            ? Consumer.failed(new Failure.PermanentError({ reason: "permanent_failure", message: `delivery to endpoint ${a.endpoint.id} ${describe}` }))
            : spent
            ? Consumer.failed(new Failure.PermanentError({ reason: "retries_exhausted", message: `delivery attempt ${a.attempt} to endpoint ${a.endpoint.id} failed: ${describe} — its ${maxAttempts} attempts are spent` }))
            : Consumer.failed(new Failure.TransientError({ message: `delivery attempt ${a.attempt} to endpoint ${a.endpoint.id} failed: ${describe}`, retryAfterSeconds: a.status === 429 || a.status === 503 ? a.retryAfterSeconds : undefined }))
        )
      }
    }
    record.endpoints.push(...health.values())
    // Batch-level log lines name the traces of the attempts they are about.
    const traced = Effect.annotateLogs({ trace_ids: TraceContext.traceIds(attempted.map((a) => a.traceparent)) })
    // Outcome facts: one append (one RPC per shard); failures are logged — the attempt itself is recorded.
    const append = (facts: ReadonlyArray<{ tenant_id: string; stream: string; draft: Promise<FactDraft> }>) =>
      Effect.gen(function*() {
        const toRelay = new Map<string, ReadonlyArray<Fact>>()
        if (facts.length === 0) return toRelay
        const drafts = yield* Effect.promise(() => Promise.all(facts.map((f) => f.draft)))
        const groups: Array<AppendGroup> = facts.map((f, i) => ({ tenant_id: f.tenant_id, stream: f.stream, facts: [drafts[i]!] }))
        const appended = yield* Effect.result(ledger.append(groups))
        if (Result.isFailure(appended)) {
          yield* traced(Effect.logError(`webhook outcome facts could not be appended: ${appended.failure.message}`))
          return toRelay
        }
        appended.success.forEach((r, i) => (r.status === "appended" || r.status === "duplicate") && toRelay.set(`${drafts[i]!.fact_id}`, r.facts))
        // A shard that could not take its outcome facts answers per group, not as a failure of the whole append.
        const notAppended = appended.success.filter((r) => r.status !== "appended" && r.status !== "duplicate")
        if (notAppended.length > 0) yield* traced(Effect.logError(`${notAppended.length} webhook outcome fact(s) could not be appended: ${notAppended.map((r) => ("message" in r ? r.message : r.status)).join("; ")}`))
        return toRelay
      })
    // The attempts' record (D1) and their outcome facts' append (the ledger) are independent: one round trip
    // of waiting for both, not two in a row. Only an endpoint the record disabled adds an append after it.
    const [disabled, toRelay] = yield* Effect.all([
      Effect.orElseSucceed(
        Effect.tapError(store.record(record), (e) => traced(Effect.logError(`webhook attempts could not be recorded: ${e.message}`))),
        () => new Set<string>() as ReadonlySet<string>
      ),
      append(newFacts)
    ], { concurrency: 2 })
    const disabledFacts: typeof newFacts = []
    for (const h of health.values()) {
      if (!disabled.has(tenantKey(h.tenant_id, h.endpoint_id))) continue
      const endpoint = attempted.find((a) => a.endpoint.id === h.endpoint_id && a.item.envelope.tenant_id === h.tenant_id)!
      disabledFacts.push({
        tenant_id: h.tenant_id,
        stream: h.endpoint_id,
        draft: FactId.make({ tenantId: h.tenant_id, cause: `${h.endpoint_id}:disabled:${endpoint.endpoint.version}`, decidedBy: source, position: 0 }).then((fact_id) => ({
          fact_id, type: PlatformFacts.WebhookEndpointDisabled.type,
          data: { endpoint_id: h.endpoint_id, reason: h.disable!, url_host: new URL(endpoint.endpoint.url).host },
          causation_id: endpoint.item.payload.fact_id, correlation_id: endpoint.item.envelope.correlation_id, caused_by: source, created_at: record.now,
          traceparent: endpoint.traceparent
        }))
      })
    }
    for (const [id, facts] of yield* append(disabledFacts)) toRelay.set(id, facts)
    if (toRelay.size === 0) return
    // Relayed once for the batch; a failure is logged (the attempts are recorded, the facts are in the ledger).
    const relayOutcomes = new Map<string, Consumer.Outcome>()
    yield* relayFor(toRelay, relayOutcomes)
    if (relayOutcomes.size > 0) yield* traced(Effect.logError("webhook outcome facts could not be relayed"))
  })

export const process = (options: Options) => (items: ReadonlyArray<{ readonly key: string; readonly value: Item }>) =>
  Effect.gen(function*() {
    const store = yield* WebhookStore
    const outcomes = new Map<string, Consumer.Outcome>()
    const tenants = [...new Set(items.map(({ value }) => (value.kind === "fact" ? value.fact.tenant_id : value.envelope.tenant_id)))]
    let configs = yield* Effect.result(store.configsFor(tenants))
    // A delivery to an endpoint the cached configs do not know (created through another isolate since they were
    // read): its tenant's configs are read again before the delivery is judged deleted.
    if (Result.isSuccess(configs)) {
      const known = configs.success
      const stale = [...new Set(items.flatMap(({ value }) =>
        value.kind === "delivery" && !(known.get(value.envelope.tenant_id) ?? []).some((e) => e.id === value.payload.webhook_config_id) ? [value.envelope.tenant_id] : []))]
      if (stale.length > 0) {
        for (const t of stale) store.invalidate(t)
        configs = yield* Effect.result(store.configsFor(tenants))
      }
    }
    if (Result.isFailure(configs)) {
      for (const { key } of items) outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: `webhook endpoints unavailable: ${configs.failure.message}` })))
      return outcomes as ReadonlyMap<string, Consumer.Outcome>
    }
    const now = new Date(yield* Clock.currentTimeMillis).toISOString()
    yield* fanOut(items.flatMap((i) => (i.value.kind === "fact" ? [{ key: i.key, value: i.value }] : [])), configs.success, outcomes, now)
    yield* deliver(items.flatMap((i) => (i.value.kind === "delivery" ? [{ key: i.key, value: i.value }] : [])), configs.success, outcomes, options)
    return outcomes as ReadonlyMap<string, Consumer.Outcome>
  })

/** A delivery's own message, for dead-lettering it alone; a fact of a fact message likewise. */
const isolate = (item: { readonly key: string; readonly value: Item }): unknown =>
  item.value.kind === "fact" ? FactMessage.isolate({ key: item.key, value: { fact: item.value.fact } }) : item.value.envelope

export const consume = Effect.fn("WebhookConsumer.consume")(function*(batch: MessageBatch<unknown>, options: Options = {}) {
  return yield* Consumer.run({ policy: RetryPolicy.webhooks, decode, isolate, process: process(options), delayScale: options.delayScale, log: options.log, runs: options.runs }, batch)
})
