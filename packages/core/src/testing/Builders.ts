/**
 * Builders for tests: a message or a fact from its definition and the fields
 * that matter, the rest filled with valid, deterministic defaults — nobody
 * fills eleven envelope fields by hand.
 *
 * ```ts
 * const dispute = message(CallDispute, { call_id: "c1", reason: "no answer" }, { subject: "c1" })
 * const charge = fact(Charge, { call_id: "c1", buyer_id: "b1", amount_cents: 250, currency: "EUR" }, { stream: "c1" })
 * ```
 */
import * as Result from "effect/Result"
import { type Envelope, type Fact, Issues } from "@factline/schemas"
import type { DataAt, FactDefinition } from "../definitions/FactDefinition.js"
import type { MessageDefinition, PayloadAt } from "../definitions/MessageDefinition.js"

export const defaultTenant = "tenant-test"
const epoch = Date.UTC(2026, 0, 1)
let counter = 0
const next = () => ++counter
const at = (n: number) => new Date(epoch + n * 1_000).toISOString()

export interface MessageOptions {
  readonly subject: string
  readonly tenant?: string
  readonly idempotencyKey?: string
  /** The `schema_version` the payload is written at (default: the latest). */
  readonly version?: number
  readonly correlationId?: string
  readonly causationId?: string
  readonly source?: string
  readonly createdAt?: string
  /** W3C `traceparent` of the message (default: none, as from a producer before trace context). */
  readonly traceparent?: string
}

/**
 * An envelope of this message type, its payload validated (a builder mistake throws, naming the field).
 * The payload is typed by the version given: the latest by default, `{ version: 1 }` a version-1 payload
 * (what an older producer still sends, upcast before the handler sees it) — no cast either way.
 */
export function message<D extends MessageDefinition<string, any, any>, const N extends number>(
  definition: D,
  payload: PayloadAt<D, N>,
  options: MessageOptions & { readonly version: N }
): Envelope
export function message<A>(definition: MessageDefinition<string, A, any>, payload: A, options: MessageOptions): Envelope
export function message<A>(definition: MessageDefinition<string, A, any>, payload: A, options: MessageOptions): Envelope {
  const n = next()
  const version = options.version ?? definition.latestVersion
  const valid = definition.validate(version, payload)
  if (Result.isFailure(valid)) {
    const problem = valid.failure
    throw new Error(`message(${definition.messageType}): ${problem._tag === "UnsupportedVersion" ? problem.message : Issues.render(problem.problems)}`)
  }
  return {
    schema_version: version,
    message_type: definition.messageType,
    message_id: `msg_test_${n}`,
    idempotency_key: options.idempotencyKey ?? `${definition.messageType}:${options.subject}:${n}`,
    correlation_id: options.correlationId ?? `corr_test_${n}`,
    ...(options.causationId === undefined ? {} : { causation_id: options.causationId }),
    tenant_id: options.tenant ?? defaultTenant,
    subject: options.subject,
    source: options.source ?? "test",
    created_at: options.createdAt ?? at(n),
    payload: payload as Record<string, unknown>,
    ...(options.traceparent === undefined ? {} : { traceparent: options.traceparent })
  } as Envelope
}

export interface FactOptions {
  /** The stream (subject) it belongs to (default `stream-1`). */
  readonly stream?: string
  readonly tenant?: string
  /** Its position in the stream (default: the next one for this stream, in the order facts are built). */
  readonly sequence?: number
  readonly factId?: string
  readonly causedBy?: string
  readonly causationId?: string
  readonly correlationId?: string
  readonly createdAt?: string
  /** W3C `traceparent` of the fact (default: none, as stored before trace context). */
  readonly traceparent?: string
}

const sequences = new Map<string, number>()

/**
 * A stored fact of this definition, its data validated (a builder mistake throws, naming the field). With
 * `{ version: n }` it is a fact stored at that older `schema_version`, its data typed as version n's and
 * validated against version n's schema: what the runtime upcasts before any product code sees it.
 */
export function fact<F extends FactDefinition<string, any, any>, const N extends number>(
  definition: F,
  data: DataAt<F, N>,
  options: FactOptions & { readonly version: N }
): Fact & { readonly type: F["type"] }
export function fact<T extends string, D>(definition: FactDefinition<T, D>, data: D, options?: FactOptions): Fact & { readonly type: T; readonly data: D }
export function fact<T extends string, D>(
  definition: FactDefinition<T, D>,
  data: unknown,
  options: FactOptions & { readonly version?: number } = {}
): Fact & { readonly type: T; readonly data: D } {
  const version = options.version ?? definition.latestVersion
  const schema = definition.versions[version - 1]?.schema
  if (schema === undefined) throw new Error(`fact(${definition.type}): no version ${version} (known: 1..${definition.latestVersion})`)
  const valid = Issues.decodeStrict(schema)(data, ["data"])
  if (Result.isFailure(valid)) throw new Error(`fact(${definition.type})${options.version === undefined ? "" : ` version ${version}`}: ${Issues.render(valid.failure)}`)
  const n = next()
  const tenant = options.tenant ?? defaultTenant
  const stream = options.stream ?? "stream-1"
  const key = `${tenant}/${stream}`
  const sequence = options.sequence ?? (sequences.get(key) ?? 0) + 1
  sequences.set(key, Math.max(sequences.get(key) ?? 0, sequence))
  return {
    fact_id: options.factId ?? `f_test_${n}`,
    tenant_id: tenant,
    stream,
    sequence,
    type: definition.type,
    data: data as D & Record<string, unknown>,
    schema_version: version,
    causation_id: options.causationId ?? `cause_test_${n}`,
    correlation_id: options.correlationId ?? `corr_test_${n}`,
    caused_by: options.causedBy ?? "test",
    created_at: options.createdAt ?? at(n),
    ...(options.traceparent === undefined ? {} : { traceparent: options.traceparent })
  }
}
