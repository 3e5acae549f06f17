/**
 * What a batch's delivery attempts leave behind: each attempt's outcome for the consumer (done, retried, or
 * failed for good — spent, refused, `410 Gone`), its row in the attempts' record (log, delivery state, endpoint
 * health: one store transaction), and the outcome facts (`webhook_sent`, `webhook_failed`, caused by the
 * triggering fact; `webhook_endpoint_disabled` for an endpoint the record disabled) appended and relayed. The
 * record and the append run side by side: one round trip of waiting, not two. Nothing here sends a delivery.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { type Fact, TraceContext, tenantKey } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import type * as FactDefinition from "../definitions/FactDefinition.js"
import * as PlatformFacts from "../definitions/PlatformFacts.js"
import * as Failure from "../failures/Failure.js"
import * as FactId from "../ledger/FactId.js"
import { Ledger } from "../ledger/Ledger.js"
import type { AppendGroup, FactDraft } from "../ledger/LedgerProtocol.js"
import { relayFor } from "../relay/FactRelay.js"
import { type DeliveryItem, source } from "./WebhookDelivery.js"
import { type EndpointConfig, type RecordBatch, WebhookStore } from "./WebhookStore.js"

/** An endpoint failing every delivery for this long is disabled (Svix: 5 days). */
export const defaultDisableAfterMs = 5 * 24 * 3600 * 1000

/** The POSTs a delivery gets: the queue's first delivery and its retries. */
export const maxAttempts = RetryPolicy.webhooks.maxRetries + 1

export interface Attempted {
  readonly key: string
  readonly item: DeliveryItem["value"]
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

/** The attempts' record as the batch fills it in (RecordBatch, its lists writable). */
export type AttemptsRecord = { -readonly [K in keyof RecordBatch]: RecordBatch[K] extends ReadonlyArray<infer T> ? Array<T> : RecordBatch[K] }

/** An endpoint's health as this batch's attempts leave it (`disable`: why it is to be disabled). */
interface Health {
  tenant_id: string
  endpoint_id: string
  succeeded: boolean
  disable?: string
}

/** An outcome fact to append: its id is computed (a digest) before the append. */
interface NewFact {
  readonly tenant_id: string
  readonly stream: string
  readonly draft: Promise<FactDraft>
}

const truncate = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s)

/**
 * Each attempt judged: its outcome set, its attempt and delivery rows added to `record`, its endpoint's health and
 * its outcome fact (a success, or a failure that is the delivery's last). `nowMs` is the batch's start: an
 * endpoint failing since `disableAfter` before it is to be disabled.
 */
export const judge = (attempted: ReadonlyArray<Attempted>, record: AttemptsRecord, nowMs: number, disableAfter: number, outcomes: Map<string, Consumer.Outcome>) => {
  const health = new Map<string, Health>()
  const newFacts: Array<NewFact> = []
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
  return { health, newFacts }
}

/** Outcome facts: one append (one RPC per shard); failures are logged — the attempt itself is recorded. Answers the facts to relay. */
const appendFacts = (facts: ReadonlyArray<NewFact>, traced: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const ledger = yield* Ledger
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

/**
 * The batch's attempts recorded (D1) and their outcome facts appended (the ledger), side by side; then the
 * `webhook_endpoint_disabled` facts of the endpoints the record disabled (one more append, only then), and every
 * fact appended relayed once for the batch (a failure is logged: the attempts are recorded, the facts are in the ledger).
 */
export const recordOutcomes = (attempted: ReadonlyArray<Attempted>, record: AttemptsRecord, health: ReadonlyMap<string, Health>, newFacts: ReadonlyArray<NewFact>) =>
  Effect.gen(function*() {
    const store = yield* WebhookStore
    record.endpoints.push(...health.values())
    // Batch-level log lines name the traces of the attempts they are about.
    const traced = Effect.annotateLogs({ trace_ids: TraceContext.traceIds(attempted.map((a) => a.traceparent)) })
    const [disabled, toRelay] = yield* Effect.all([
      Effect.orElseSucceed(
        Effect.tapError(store.record(record), (e) => traced(Effect.logError(`webhook attempts could not be recorded: ${e.message}`))),
        () => new Set<string>() as ReadonlySet<string>
      ),
      appendFacts(newFacts, traced)
    ], { concurrency: 2 })
    const disabledFacts: Array<NewFact> = []
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
    for (const [id, facts] of yield* appendFacts(disabledFacts, traced)) toRelay.set(id, facts)
    if (toRelay.size === 0) return
    const relayOutcomes = new Map<string, Consumer.Outcome>()
    yield* relayFor(toRelay, relayOutcomes)
    if (relayOutcomes.size > 0) yield* traced(Effect.logError("webhook outcome facts could not be relayed"))
  })
