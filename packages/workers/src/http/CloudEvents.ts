/**
 * CloudEvents 1.0 over HTTP, mapped onto factline envelopes.
 *
 * Structured mode (`application/cloudevents+json`), batch mode
 * (`application/cloudevents-batch+json`) and binary mode (`ce-*` headers,
 * percent-decoded as the HTTP binding requires — see `decodeHeaderValue` —, the body is `data`). `type` → `message_type`, `id` → `message_id`, `source`,
 * `subject`, `time` → `created_at`, `data` → `payload`; factline's own fields
 * travel as extension attributes: `schemaversion` (default: the type's latest
 * version), `idempotencykey` (default: `ce:` + `source` + `:` + `id`, each
 * percent-encoded — see `defaultIdempotencyKey`; CloudEvents requires
 * source + id to be unique per event, so a producer's retry keeps it),
 * `correlationid`, `causationid`, `tenantid`, and `traceparent` (the
 * distributed-tracing extension: the envelope's W3C `traceparent`), and
 * `delayseconds` (the envelope input's `delay_seconds`, a delayed send: an
 * integer or its decimal string, as binary mode carries it). Other
 * attributes are ignored, as the spec asks of consumers. Validation then
 * happens on the envelope, as for any other input.
 */
import type { MessageDefinition } from "@factline/core"
import * as Accept from "./Accept.js"

export type Mode = "structured" | "batch" | "binary"

export const mode = (contentType: string | undefined, headers: Headers): Mode | undefined => {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase()
  if (type === "application/cloudevents+json") return "structured"
  if (type === "application/cloudevents-batch+json") return "batch"
  if (headers.has("ce-specversion")) return "binary"
  return undefined
}

/**
 * The default idempotency key of a CloudEvent: `ce:<source>:<id>`, both
 * percent-encoded (`encodeURIComponent`), so no `:` of either part survives and
 * the key is unambiguous — `/billing` + `x/1` and `/billing/x` + `1` stay apart.
 */
export const defaultIdempotencyKey = (source: string, id: string): string =>
  `ce:${encodeURIComponent(source)}:${encodeURIComponent(id)}`

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** One CloudEvent (its attributes and `data`) → an envelope input, or the problems that prevent it. */
export const toEnvelope = (
  event: unknown,
  definitions: ReadonlyMap<string, MessageDefinition.MessageDefinition>
): { readonly input?: Record<string, unknown>; readonly problems: ReadonlyArray<{ path: string; message: string }> } => {
  if (!isObject(event)) return { problems: [{ path: "", message: "a CloudEvent must be a JSON object" }] }
  const problems: Array<{ path: string; message: string }> = []
  if (event.specversion !== "1.0") problems.push({ path: "specversion", message: 'must be "1.0"' })
  for (const required of ["id", "source", "type"]) {
    if (typeof event[required] !== "string" || event[required] === "") problems.push({ path: required, message: "required by CloudEvents 1.0" })
  }
  if (event.data_base64 !== undefined) problems.push({ path: "data_base64", message: "binary data is not supported; send JSON data" })
  if (problems.length > 0) return { problems }
  const type = event.type as string
  const version = event.schemaversion ?? definitions.get(type)?.latestVersion
  const input: Record<string, unknown> = {
    schema_version: typeof version === "string" && /^\d+$/.test(version) ? Number(version) : version,
    message_type: type,
    message_id: event.id,
    idempotency_key: event.idempotencykey ?? defaultIdempotencyKey(event.source as string, event.id as string),
    source: event.source,
    subject: event.subject,
    payload: event.data
  }
  const optional: Record<string, string> = { time: "created_at", correlationid: "correlation_id", causationid: "causation_id", tenantid: "tenant_id", traceparent: "traceparent" }
  for (const [attribute, field] of Object.entries(optional)) if (event[attribute] !== undefined) input[field] = event[attribute]
  const delay = event.delayseconds
  if (delay !== undefined) input.delay_seconds = typeof delay === "string" && /^\d+$/.test(delay) ? Number(delay) : delay
  return { input, problems: [] }
}

/**
 * One `ce-*` header value → its attribute value, as the HTTP binding (1.0.2, 3.1.3.2) decodes it: a
 * double-quoted string is unescaped first, then one round of percent-decoding, whose bytes must be valid
 * UTF-8 (overlong forms such as `%C0%A0` included). Refused, rather than guessed at: a character outside
 * printable ASCII (the binding's encoders percent-encode every other one; workerd hands a Worker invalid
 * UTF-8 bytes as U+FFFD, so `evt-\xff` and `evt-\xfe` would otherwise become one id), a `%` not followed
 * by two hex digits, a stray `"`, and a decoded control character (CloudEvents attribute values exclude them).
 */
export const decodeHeaderValue = (raw: string): { readonly value: string } | { readonly problem: string } => {
  if (raw.includes("\uFFFD")) return { problem: "holds bytes that are not valid UTF-8; percent-encode the value's UTF-8 bytes (%XX)" }
  if (!/^[\x20-\x7E]*$/.test(raw)) return { problem: "holds characters outside printable ASCII; percent-encode the value's UTF-8 bytes (%XX), as the CloudEvents HTTP binding requires" }
  let text = raw
  if (text.startsWith('"')) {
    const quoted = /^"((?:[^"\\]|\\.)*)"$/.exec(text)
    if (!quoted) return { problem: "is an unterminated or malformed quoted string" }
    text = quoted[1]!.replace(/\\(.)/g, "$1")
  } else if (text.includes('"')) {
    return { problem: 'holds a double quote; percent-encode it (%22)' }
  }
  if (/%(?![0-9A-Fa-f]{2})/.test(text)) return { problem: "holds a % not followed by two hex digits; percent-encode % itself as %25" }
  const bytes: Array<number> = []
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "%") {
      bytes.push(Number.parseInt(text.slice(i + 1, i + 3), 16))
      i += 2
    } else bytes.push(text.charCodeAt(i))
  }
  let value: string
  try {
    // fatal: invalid or overlong UTF-8 is refused; ignoreBOM: a leading BOM stays part of the value.
    value = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(new Uint8Array(bytes))
  } catch {
    return { problem: "percent-decodes to bytes that are not valid UTF-8" }
  }
  if (/[\u0000-\u001F\u007F-\u009F]/.test(value)) return { problem: "decodes to a control character, which no CloudEvents attribute may hold" }
  return { value }
}

/**
 * Binary mode: the `ce-*` headers are the attributes (each decoded by `decodeHeaderValue`), the body is
 * `data`; or the problems, one per header at fault (`headers.ce-id`).
 */
export const fromBinary = (
  headers: Headers,
  data: unknown
): { readonly event: Record<string, unknown>; readonly problems: ReadonlyArray<{ path: string; message: string }> } => {
  const event: Record<string, unknown> = { data }
  const problems: Array<{ path: string; message: string }> = []
  headers.forEach((raw, name) => {
    const header = name.toLowerCase()
    if (!header.startsWith("ce-")) return
    const decoded = decodeHeaderValue(raw)
    if ("value" in decoded) event[header.slice(3)] = decoded.value
    else problems.push({ path: `headers.${header}`, message: `${header} ${decoded.problem}` })
  })
  return { event, problems }
}

export const batchContentType = "application/cloudevents-batch+json"

/**
 * Whether a fact read answers a CloudEvents batch rather than factline's JSON (its default): as the reader's
 * `Accept` weighs the two (Accept.ts) — `application/cloudevents-batch+json;q=0` is never answered, and a
 * header refusing both is a 406 `RequestRefused`.
 */
export const wantsBatch = (accept: string | undefined): boolean => Accept.negotiate(accept, ["application/json", batchContentType]) === batchContentType

/**
 * A fact as a CloudEvent 1.0 (structured JSON): `id` = `fact_id` (unique and
 * stable), `source` = `/factline/tenants/<tenant>/streams/<stream>` (each part
 * percent-encoded), `type` = the fact type, `subject` = the stream, `time` =
 * `created_at`, `data` = the fact's data (`datacontenttype: application/json`);
 * the ledger's own fields as extension attributes, all strings: `sequence` (the
 * position in the stream, zero-padded to 20 digits — the CloudEvents Sequence
 * extension requires a string that orders lexicographically, and the source is
 * one stream), `causationid` and `correlationid` (the Correlation extension's
 * attributes), `causedby`, `tenantid`, `schemaversion` (the version of the
 * type's schema `data` is in: the latest this platform knows, older facts
 * upcast); and `traceparent` (the distributed-tracing extension) when the
 * fact has one.
 */
export const fromFact = (fact: {
  readonly fact_id: string
  readonly tenant_id: string
  readonly stream: string
  readonly sequence: number
  readonly type: string
  readonly data: unknown
  readonly causation_id: string
  readonly correlation_id: string
  readonly caused_by: string
  readonly created_at: string
  readonly traceparent?: string | null | undefined
  readonly schema_version?: number | undefined
}) => ({
  specversion: "1.0",
  id: fact.fact_id,
  source: `/factline/tenants/${encodeURIComponent(fact.tenant_id)}/streams/${encodeURIComponent(fact.stream)}`,
  type: fact.type,
  subject: fact.stream,
  time: fact.created_at,
  datacontenttype: "application/json",
  data: fact.data,
  sequence: String(fact.sequence).padStart(20, "0"),
  causationid: fact.causation_id,
  correlationid: fact.correlation_id,
  causedby: fact.caused_by,
  tenantid: fact.tenant_id,
  schemaversion: String(fact.schema_version ?? 1),
  ...(typeof fact.traceparent === "string" ? { traceparent: fact.traceparent } : {})
})
