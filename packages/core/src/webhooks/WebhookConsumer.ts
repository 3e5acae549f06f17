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
import { Envelope, type Fact, Issues, TraceContext, WebhookPayload as WebhookPayloadSchema, tenantKey } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as Failure from "../failures/Failure.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import type * as FactDefinition from "../definitions/FactDefinition.js"
import { Queues } from "../platform/Queues.js"
import * as SendBatches from "../platform/SendBatches.js"
import * as FactMessage from "../relay/FactMessage.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import { Registry } from "../registry/Registry.js"
import * as DeliveryGates from "./DeliveryGates.js"
import * as DeliveryOutcomes from "./DeliveryOutcomes.js"
import * as EndpointLimiter from "./EndpointLimiter.js"
import { EndpointLimits } from "./EndpointLimits.js"
import * as Signing from "./Signing.js"
import * as PersonalPayloads from "./PersonalPayloads.js"
import { body, type DeliveryItem, deliveryMessage, existedAt, isDelivery, type Item, maxDeliveryBytes } from "./WebhookDelivery.js"
import { type EndpointConfig, WebhookStore } from "./WebhookStore.js"
import * as UrlGuard from "./UrlGuard.js"
import { WebhookTransport } from "./WebhookTransport.js"
import * as Telemetry from "../platform/Telemetry.js"
import * as Time from "../platform/Time.js"

export { body, deliveryId, deliveryMessage, deliveryMessageType, existedAt, maxDeliveryBytes, source } from "./WebhookDelivery.js"
export { defaultDisableAfterMs } from "./DeliveryOutcomes.js"

export interface Options {
  /** `FACTLINE_LOCAL_DEVELOPMENT`: loopback answers of the resolver are allowed (as loopback URLs are). */
  readonly localDevelopment?: boolean
  readonly delayScale?: number
  readonly log?: Consumer.LogLevel
  readonly runs?: Consumer.Options["runs"]
  readonly disableAfterMs?: number
}

const decodeEnvelope = Issues.decodeStrict(Envelope)
const decodePayload = Issues.decodeStrict(WebhookPayloadSchema)

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

const fanOut = (items: ReadonlyArray<{ key: string; value: Extract<Item, { kind: "fact" }> }>, configs: ReadonlyMap<string, ReadonlyArray<EndpointConfig>>, outcomes: Map<string, Consumer.Outcome>, now: string) =>
  Effect.gen(function*() {
    const registry = yield* Registry
    const queues = yield* Queues
    const sender = yield* Telemetry.sender
    const out: Array<{ key: string; body: Envelope }> = []
    // Payloads are built from the facts with personal fields opened (one key ring call for the batch), and the
    // delivery messages carry them sealed again (on the queue and in the delivery record); a delivery opens them to send.
    const keyRing = yield* KeyRing
    const opened = registry.hasPersonalData ? yield* Effect.result(Sealing.openFacts(keyRing, registry.personalFact, items.map((i) => i.value.fact))) : undefined
    if (opened !== undefined && Result.isFailure(opened)) {
      for (const { key } of items) outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: opened.failure.message })))
      return
    }
    for (const [index, { key, value }] of items.entries()) {
      const events = value.replayed ? [] : registry.webhooksFor(value.fact.type)
      const endpoints = (configs.get(value.fact.tenant_id) ?? []).filter((e) => e.enabled && existedAt(e, value.fact))
      const plain = opened === undefined ? value.fact : opened.success[index]!
      // Payloads are built from the fact's latest shape; one newer than the code is refused (dead-lettered), never sent.
      const current = events.length === 0 || endpoints.length === 0 ? Result.succeed(plain) : registry.latest(plain)
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
        const declaration = registry.personalFact(value.fact.type)
        if (declaration !== undefined && plain !== value.fact) {
          const sealed = yield* Effect.result(PersonalPayloads.resealed(keyRing, declaration, value.fact, plain, data))
          if (Result.isFailure(sealed)) {
            outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: sealed.failure.message })))
            break
          }
          data = sealed.success
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
      if (outcomes.has(key)) continue
      outcomes.set(key, failed ? Consumer.failed(new Failure.PermanentError({ reason: "permanent_failure", message: failed })) : Consumer.done)
    }
    // The messages the door did not send (those after the failed call) retry their facts.
    const sent = yield* Effect.result(queues.send(RetryPolicy.webhooks.queue, out.map((o) => o.body)))
    if (Result.isFailure(sent)) {
      for (const o of out.slice(sent.failure.sent)) outcomes.set(o.key, Consumer.failed(new Failure.TransientError({ message: `could not enqueue deliveries: ${sent.failure.message}` })))
    }
  })

type Configs = ReadonlyMap<string, ReadonlyArray<EndpointConfig>>

/**
 * POSTs the deliveries to attempt (held, throttled and refused ones aside), concurrently: a delivery already
 * succeeded is done, one whose endpoint is gone or disabled is recorded as skipped or failed, one whose host
 * could not be resolved is retried, one refused by the URL guard is recorded as refused. Answers the attempts.
 */
const post = (
  items: ReadonlyArray<DeliveryItem>,
  configs: Configs,
  states: DeliveryGates.DeliveryStates,
  verdicts: ReadonlyMap<string, DeliveryGates.HostVerdict>,
  record: DeliveryOutcomes.AttemptsRecord,
  outcomes: Map<string, Consumer.Outcome>,
  opened: ReadonlyMap<string, unknown>
) =>
  Effect.gen(function*() {
    const transport = yield* WebhookTransport
    const sender = yield* Telemetry.sender
    const attempted: Array<DeliveryOutcomes.Attempted> = []
    yield* Effect.forEach(items, ({ key, value }) =>
      Effect.gen(function*() {
        const { payload, envelope } = value
        const tenant = envelope.tenant_id
        const state = states.get(tenantKey(tenant, payload.delivery_id))
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
        const text = body(opened.has(key) ? { ...payload, payload: opened.get(key) } : payload)
        const timestamp = Math.floor((yield* Time.millis) / 1000)
        const signed = yield* Effect.promise(() => Signing.headers(endpoint.secrets, payload.delivery_id, timestamp, text))
        const traceparent = sender(envelope.traceparent) ?? TraceContext.child(envelope.traceparent)
        const response = yield* transport.post(endpoint.url, { ...signed, traceparent }, text)
        attempted.push({ key, item: value, endpoint, attempt: (state?.attempts ?? 0) + 1, ...response, attemptedAt: yield* Time.now, traceparent })
      }), { concurrency: "unbounded", discard: true })
    return attempted
  })

const deliver = (items: ReadonlyArray<DeliveryItem>, configs: Configs, outcomes: Map<string, Consumer.Outcome>, options: Options) =>
  Effect.gen(function*() {
    if (items.length === 0) return
    const store = yield* WebhookStore
    const limiter = yield* EndpointLimits
    const states = yield* Effect.result(store.deliveryStates(items.map(({ value }) => ({ tenant_id: value.envelope.tenant_id, delivery_id: value.payload.delivery_id }))))
    if (Result.isFailure(states)) {
      for (const { key } of items) outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: `delivery states unavailable: ${states.failure.message}` })))
      return
    }
    const nowMs = yield* Clock.currentTimeMillis
    const record: DeliveryOutcomes.AttemptsRecord = { attempts: [], deliveries: [], endpoints: [], now: new Date(nowMs).toISOString() }
    const now = yield* DeliveryGates.deferHeld(items, states.success, nowMs, outcomes)
    const toSend = now.flatMap(({ value }) => (configs.get(value.envelope.tenant_id) ?? []).filter((e) => e.enabled && e.id === value.payload.webhook_config_id))
    const verdicts = yield* DeliveryGates.resolveHosts(toSend.map((e) => e.url), options.localDevelopment === true)
    // Endpoints with limits: their deliveries the limiter does not grant now are parked (not POSTed).
    const limited = yield* DeliveryGates.throttle(now, configs, states.success, verdicts, record, outcomes)
    const sending = now.filter(({ key }) => !limited.held.has(key))
    // Personal fields travel sealed; they are opened for the POST only (erased: the marker).
    const opened = yield* PersonalPayloads.openDeliveries(sending, outcomes)
    const attempted = yield* post(sending.filter(({ key }) => !outcomes.has(key)), configs, states.success, verdicts, record, outcomes, opened)
    // The POSTs are over: their slots go back (a release that fails is logged; the leases expire by themselves).
    yield* Effect.forEach(limited.leases, (l) =>
      Effect.catch(limiter.release(l.tenant_id, l.endpoint_id, l.ids), (e) => Effect.logWarning(`endpoint ${l.endpoint_id}'s rate limit slots not released (they expire in ${EndpointLimiter.leaseMs / 1000} s): ${e.message}`)), { concurrency: "unbounded", discard: true })

    const slowest = new Map<string, number>()
    for (const a of attempted) slowest.set(a.item.envelope.tenant_id, Math.max(slowest.get(a.item.envelope.tenant_id) ?? 0, a.durationMs))
    const afterMs = yield* Clock.currentTimeMillis
    for (const [tenant, ms] of slowest) DeliveryGates.holds.observe(tenant, ms, afterMs)
    const judged = DeliveryOutcomes.judge(attempted, record, nowMs, options.disableAfterMs ?? DeliveryOutcomes.defaultDisableAfterMs, outcomes)
    // The attempts' record (D1) and their outcome facts' append (the ledger) are independent: one round trip
    // of waiting for both, not two in a row. Only an endpoint the record disabled adds an append after it.
    yield* DeliveryOutcomes.recordOutcomes(attempted, record, judged.health, judged.newFacts)
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
