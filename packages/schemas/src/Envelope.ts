/**
 * The envelope every message on every factline queue travels in.
 *
 * Field rules (docs/architecture.md "The message contract"): `idempotency_key` is the dedupe key (never
 * `message_id`), `tenant_id` is the isolation boundary, exactly one of
 * `payload` / `payload_ref` is present. This module validates the envelope only;
 * the payload is validated against the registered schema by the events consumer (through the registry).
 */
import * as Schema from "effect/Schema"
import { Traceparent } from "./TraceContext.js"

const NonEmpty = (max: number) => Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(max))

/**
 * Namespaced lower-case routing key: `call.completed`, `payment.capture` — the registry's naming rule
 * (core's `Naming`: lower-case words joined by `_`, `-` or `.`, at most 64 characters) with at least one dot.
 */
export const MessageType = Schema.String.check(
  Schema.isMaxLength(64),
  Schema.isPattern(/^(?=[^.]*\.)[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$/, {
    message: "must be lower-case words joined by '_', '-' or '.', with at least one dot, e.g. call.completed"
  })
)

/** A tenant id never contains `/`, so `tenant/subject` shard keys are unambiguous. */
export const TenantId = Schema.String.check(
  Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, {
    message: "must be 1-64 letters, digits, '_', '.' or '-'"
  })
)

/**
 * The tenant the platform's own alert endpoints belong to (operator alerts, `/v1/alerts`): a valid tenant id,
 * so deliveries to them are ordinary webhook deliveries, and reserved — no token may be bound to it, so no
 * tenant ever reads, writes or receives what it holds.
 */
export const alertsTenantId = "factline.alerts"

/**
 * The one encoding of a key within a tenant (an idempotency key, a stream, a fact id, a delivery, an R2
 * object name): `tenant/key`. Unambiguous because a tenant id never contains `/`.
 */
export const tenantKey = (tenantId: string, key: string): string => `${tenantId}/${key}`

const isoDateTime = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$/

/**
 * Whether an ISO-8601 date-time names a real instant: a month of 1–12, a day the month has (Feb 29 in leap
 * years only), hours 0–23, minutes and seconds 0–59, an offset up to ±23:59. `Date.parse` would roll
 * 2020-02-30 over to March 1st rather than refuse it.
 */
export const isRealDateTime = (text: string): boolean => {
  const m = isoDateTime.exec(text)
  if (m === null) return false
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate()
  const offsetOk = m[9] === undefined || (Number(m[9]) <= 23 && Number(m[10]) <= 59)
  return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth && hour <= 23 && minute <= 59 && second <= 59 && offsetOk
}

export const IsoDateTime = Schema.String.check(
  Schema.isPattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/, {
    message: "must be an ISO-8601 date-time, e.g. 2026-11-22T10:00:00Z"
  }),
  Schema.makeFilter((text: string) => !isoDateTime.test(text) || isRealDateTime(text), { message: "must be a real date and time (a month of 1-12, a day the month has, 00:00:00-23:59:59)" })
)

/** `r2://<key>`: where a payload over 64 KiB was put by the producer. */
export const PayloadRef = Schema.String.check(
  Schema.isPattern(/^r2:\/\/.+/, { message: "must be an r2:// reference" })
)

export const Payload = Schema.Record(Schema.String, Schema.Unknown)

export const SchemaVersion = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

const exactlyOnePayload = Schema.makeFilter(
  (e: { readonly payload?: unknown; readonly payload_ref?: unknown }) =>
    (e.payload === undefined) !== (e.payload_ref === undefined)
      ? undefined
      : "exactly one of payload or payload_ref is required"
)

const fields = {
  schema_version: SchemaVersion,
  message_type: MessageType,
  message_id: NonEmpty(128),
  idempotency_key: NonEmpty(256),
  correlation_id: NonEmpty(256),
  causation_id: Schema.optional(NonEmpty(256)),
  tenant_id: TenantId,
  subject: NonEmpty(256),
  source: NonEmpty(128),
  created_at: IsoDateTime,
  payload: Schema.optional(Payload),
  payload_ref: Schema.optional(PayloadRef),
  /**
   * W3C trace context (TraceContext.ts): the trace this message belongs to. Filled by the producer (from
   * the HTTP `traceparent` header, or a new trace) when absent; optional on the queue, so messages from
   * before trace context still decode (their facts start a trace of their own).
   */
  traceparent: Schema.optional(Traceparent),
  /**
   * Not to be processed before this time: set once, when the producer accepts a delayed send (`delay_seconds`),
   * and carried as it is by every later copy (a consumer retry, a redelivery, a dead-letter replay, a recover
   * re-send) — the events consumer parks a copy that arrives earlier for what is left, so no copy restarts the
   * delay. Optional: messages without it (all those from before it) are due at once.
   */
  deliver_after: Schema.optional(IsoDateTime),
  /**
   * Set by the HTTP edge once it has bound `idempotency_key` to this payload (core's producing/KeyReceipts.ts):
   * an HMAC under the platform's key that lets the events consumer skip binding the key again. Optional: a
   * message without one (a service's own send, or one from before receipts) is bound by the consumer, as is
   * one whose receipt does not verify.
   */
  key_receipt: Schema.optional(NonEmpty(64))
}

/** A complete envelope, as it travels on a queue. */
export const Envelope = Schema.Struct(fields).check(exactlyOnePayload)
export type Envelope = typeof Envelope.Type

/** Cloudflare Queues' longest delivery delay (`delaySeconds`): 12 hours. */
export const maxDelaySeconds = 43_200

/** A delivery delay in whole seconds, 0 to 43,200 (12 h, the most Cloudflare Queues allows). */
export const DelaySeconds = Schema.Int.check(
  Schema.isBetween({ minimum: 0, maximum: maxDelaySeconds }, { message: "must be a whole number of seconds from 0 to 43200 (12 hours)" })
)

const oneDelay = Schema.makeFilter(
  (e: { readonly delay_seconds?: unknown; readonly deliver_after?: unknown }) =>
    e.delay_seconds !== undefined && e.deliver_after !== undefined
      ? { path: ["delay_seconds"], issue: "give delay_seconds or deliver_after, not both" }
      : undefined
)

/**
 * What a producer (or an HTTP client) hands in: the envelope before the
 * producer-side defaults (`message_id`, `created_at`, `correlation_id`) are filled,
 * with an optional `delay_seconds` the producer turns into `deliver_after`
 * (`deliver_after` itself is accepted for a re-send of an envelope that has one).
 */
// What a producer hands in never carries a key receipt: only the edge makes one, after binding the key.
const { key_receipt: _receipt, ...inputFields } = fields

export const EnvelopeInput = Schema.Struct({
  ...inputFields,
  message_id: Schema.optional(fields.message_id),
  correlation_id: Schema.optional(fields.correlation_id),
  created_at: Schema.optional(fields.created_at),
  delay_seconds: Schema.optional(DelaySeconds)
}).check(exactlyOnePayload, oneDelay)
export type EnvelopeInput = typeof EnvelopeInput.Type
