/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent`
 * that travels with every message and fact, so one trace id follows an event
 * from `POST /v1/events` through every queue hop, every fact it causes and
 * every webhook delivery.
 *
 * `traceparent` = `<version>-<trace-id>-<parent-id>-<trace-flags>`: version
 * `00` is exactly `00-` + 32 lower-case hex + `-` + 16 hex + `-` + 2 hex;
 * an all-zero trace-id or parent-id is invalid, as is version `ff`. A later
 * version is accepted when its first four fields parse (the spec asks
 * parsers to), and whatever factline derives from it is version `00`.
 *
 * Each hop keeps the trace-id and the flags and takes a new parent-id
 * (`child`): the facts a handler or processor appends, a webhook delivery and
 * each of its attempts. This module only reads, checks and derives the value;
 * it records no spans and does not propagate `tracestate`.
 */
import * as Schema from "effect/Schema"

const hex = (n: number) => `[0-9a-f]{${n}}`
const fields = `-(?!0{32})${hex(32)}-(?!0{16})${hex(16)}-${hex(2)}`
const pattern = new RegExp(`^(?:00${fields}|(?!00|ff)${hex(2)}${fields}(?:-.*)?)$`)

export const formatMessage =
  "must be a W3C traceparent: 00-<trace-id, 32 lower-case hex>-<parent-id, 16 lower-case hex>-<trace-flags, 2 hex>, neither id all zeros"

/** A `traceparent` value: checked, kept as given. */
export const Traceparent = Schema.String.check(
  Schema.isMaxLength(256),
  Schema.isPattern(pattern, { message: formatMessage })
).annotate({
  description: "W3C trace context (https://www.w3.org/TR/trace-context/): 00-<trace-id, 32 hex>-<parent-id, 16 hex>-<trace-flags, 2 hex>",
  examples: ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"]
})
export type Traceparent = typeof Traceparent.Type

export interface Parsed {
  readonly version: string
  /** 32 lower-case hex characters, never all zeros. */
  readonly traceId: string
  /** 16 lower-case hex characters, never all zeros: the span that sent this value. */
  readonly parentId: string
  readonly flags: string
}

/** Whether a value is a valid `traceparent`. */
export const isValid = (value: unknown): value is string => typeof value === "string" && value.length <= 256 && pattern.test(value)

/** The fields of a valid `traceparent`, or undefined. */
export const parse = (value: unknown): Parsed | undefined => {
  if (!isValid(value)) return undefined
  return { version: value.slice(0, 2), traceId: value.slice(3, 35), parentId: value.slice(36, 52), flags: value.slice(53, 55) }
}

/** The trace id of a `traceparent`, or undefined when there is none (or it is invalid). */
export const traceId = (value: unknown): string | undefined => parse(value)?.traceId

/** The distinct trace ids of some `traceparent`s, in order, at most `max` (for a log line about many facts). */
export const traceIds = (traceparents: Iterable<unknown>, max = 100): Array<string> => {
  const ids = new Set<string>()
  for (const value of traceparents) {
    if (ids.size >= max) break
    const id = traceId(value)
    if (id !== undefined) ids.add(id)
  }
  return [...ids]
}

/** Web Crypto's one function used here (a global in workerd and Node ≥ 19; this package declares no platform types). */
declare const crypto: { getRandomValues<T extends Uint8Array>(array: T): T }

const randomHex = (bytes: number): string => {
  for (;;) {
    const out = [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("")
    if (/[^0]/.test(out)) return out
  }
}

/** A new id of a span (a parent-id): 16 random hex characters, never all zeros. */
export const newParentId = (): string => randomHex(8)

export const format = (parts: { readonly traceId: string; readonly parentId: string; readonly flags: string }): string =>
  `00-${parts.traceId}-${parts.parentId}-${parts.flags}`

/**
 * A new trace: a random trace-id and parent-id, flags `01` (sampled: the
 * ledger keeps every fact, so what the trace covers is recorded).
 */
export const generate = (): string => format({ traceId: randomHex(16), parentId: newParentId(), flags: "01" })

/**
 * The next hop of a trace: the same trace-id and flags, a new parent-id. With
 * no (valid) `traceparent` — a message from before trace context, or a fact
 * stored before it — the hop starts a new trace.
 */
export const child = (traceparent: string | undefined): string => {
  const parent = parse(traceparent)
  return parent === undefined ? generate() : format({ traceId: parent.traceId, parentId: newParentId(), flags: parent.flags })
}
