/**
 * The consumer's log lines: one per processing attempt that did not succeed (and, when asked for, per acked
 * attempt), one per batch with its counts, and a warn line for a batch that handed work back (Deadline).
 * JSON that Workers Logs indexes; never a payload. `Consumer.run` writes them once its messages are settled;
 * this module only builds and writes lines — it decides nothing about a message.
 */
import * as Effect from "effect/Effect"
import { TraceContext } from "@factline/schemas"
import * as QueueGroups from "./QueueGroups.js"
import * as Time from "../platform/Time.js"
import type { Verdict } from "./Verdict.js"

/**
 * Which log lines a batch writes (`FACTLINE_LOG_ATTEMPTS`): `batch` (default) — one line per batch with its
 * counts, and one per attempt that did not succeed (retried, parked, dead-lettered); `all` — that, and a
 * line per acked attempt too (opt-in: a line per message costs CPU on the hot path); `failures` — the
 * failures' lines alone; `none`.
 */
export type LogLevel = "all" | "batch" | "failures" | "none"

const text = (body: unknown, field: string): string | undefined => {
  if (typeof body !== "object" || body === null) return undefined
  const value = (body as Record<string, unknown>)[field]
  return typeof value === "string" ? value.slice(0, 256) : undefined
}

/**
 * The trace ids of the facts a fact message carries inline (`{ facts }` or `{ fact }`), distinct, in order
 * (at most 100); empty for any other message (an envelope's own trace is its `traceparent`).
 */
export const traceIdsOf = (body: unknown): ReadonlyArray<string> => {
  if (typeof body !== "object" || body === null) return []
  const payload = (body as { readonly payload?: unknown }).payload
  if (typeof payload !== "object" || payload === null) return []
  const { facts, fact } = payload as { readonly facts?: unknown; readonly fact?: unknown }
  const list: ReadonlyArray<unknown> = Array.isArray(facts) ? facts : fact === undefined ? [] : [fact]
  return TraceContext.traceIds(list.map((f) => (typeof f === "object" && f !== null ? (f as { readonly traceparent?: unknown }).traceparent : undefined)))
}

/** How a batch's queue appears in its log lines, read once per batch: its purpose, and its group for a group queue. */
export interface QueueFields {
  readonly queue: string
  readonly queue_group?: number
}

/** `factline-events-3` → `{ queue: "factline-events", queue_group: 3 }`; any other name as it is. */
export const queueFields = (batchQueue: string): QueueFields => {
  const parsed = QueueGroups.parse(batchQueue)
  return parsed?.group === undefined ? { queue: batchQueue } : { queue: parsed.policy.queue, queue_group: parsed.group }
}

const traceIds = (body: unknown) => {
  const ids = traceIdsOf(body)
  return ids.length === 0 ? {} : { trace_ids: ids }
}

/**
 * The structured log line of one processing attempt (Pattern 002's fields, and seed 003's `source`,
 * `queue_timestamp` and `processing_delay_ms`), as JSON that Workers Logs indexes. Never the payload: ids,
 * type, subject, the producing service (`source`), outcome, the error's class and first line, how long the
 * message waited on the queue (`processing_delay_ms`: the batch's start, `startedAt`, minus the message's
 * enqueue time `timestamp`; a retried message's counts from its first send, as Queues keeps it) and the
 * trace: the message's `traceparent`, and for a fact message the `trace_ids` of the facts it carries.
 * `queue` is the batch's queue read as its purpose (`factline-events-3` → `factline-events`, the name every
 * other record uses); a group queue's group is `queue_group`.
 */
export const attemptLine = (
  queue: QueueFields,
  m: { readonly id: string; readonly attempts: number; readonly body: unknown; readonly timestamp: Date },
  startedAt: number,
  outcome: "acked" | "retried" | "parked" | "dead_lettered" | "handed_back",
  errorClass?: string,
  error?: string
) => {
  const enqueuedAt = new Date(m.timestamp).getTime()
  return JSON.stringify({
    level: outcome === "acked" || outcome === "handed_back" ? "info" : outcome === "retried" || outcome === "parked" ? "warn" : "error",
    message: "queue message processed",
    ...queue,
    message_id: m.id,
    attempt: m.attempts,
    outcome,
    correlation_id: text(m.body, "correlation_id"),
    idempotency_key: text(m.body, "idempotency_key"),
    type: text(m.body, "message_type"),
    source: text(m.body, "source"),
    subject: text(m.body, "subject"),
    tenant_id: text(m.body, "tenant_id"),
    ...(Number.isFinite(enqueuedAt) ? { queue_timestamp: new Date(enqueuedAt).toISOString(), processing_delay_ms: Math.max(0, startedAt - enqueuedAt) } : {}),
    traceparent: text(m.body, "traceparent"),
    ...traceIds(m.body),
    ...(errorClass === undefined ? {} : { error_class: errorClass }),
    ...(error === undefined ? {} : { error: error.split("\n")[0]!.slice(0, 500) })
  })
}

/** What a batch did, as `Consumer.run` returns it and its batch line counts it. */
export interface Counts {
  readonly acked: number
  readonly retried: number
  readonly deadLettered: number
  readonly deadLetteredByReason: Readonly<Record<string, number>>
  readonly handedBack?: number
}

/**
 * The one log line of a batch (`FACTLINE_LOG_ATTEMPTS=batch`, the default, and `all`): its queue, size and
 * counts — no per-message field, so it costs the same for 1 message or 100. Its failures have lines of their own.
 * `retried` counts the failed attempts retried; `parked` and `handed_back` (when any) are counted apart.
 */
export const batchLine = (queue: QueueFields, messages: number, counts: Counts, parked: number) =>
  JSON.stringify({
    // Info whatever the counts: each failure has its own warn or error line.
    level: "info",
    message: "queue batch processed",
    ...queue,
    messages,
    acked: counts.acked,
    retried: counts.retried - parked - (counts.handedBack ?? 0),
    parked,
    ...((counts.handedBack ?? 0) > 0 ? { handed_back: counts.handedBack } : {}),
    dead_lettered: counts.deadLettered,
    ...(counts.deadLettered > 0 ? { dead_lettered_by_reason: counts.deadLetteredByReason } : {})
  })

/**
 * The warn line of a batch that handed work back (Deadline): how many of its messages go back to the queue
 * unstarted, how long the batch had run and its budget. Written whatever `FACTLINE_LOG_ATTEMPTS` says but `none`.
 */
export const handedBackLine = (queue: QueueFields, messages: number, handedBack: number, elapsedMs: number, budgetMs: number) =>
  JSON.stringify({
    level: "warn",
    message: "queue batch handed messages back before its time limit",
    ...queue,
    messages,
    handed_back: handedBack,
    elapsed_ms: elapsedMs,
    budget_ms: budgetMs
  })

/**
 * A settled batch's log lines: a line per attempt that did not succeed (its trace read from that message alone), a
 * line per acked attempt only with `all`, and one line for the batch with its counts (`batch`, `all`). Work handed
 * back unstarted: a line per message only with `all`, and one warn line for the batch with how many (but `none`).
 * Returns the batch's counts.
 */
export const write = Effect.fnUntraced(function*(
  fields: QueueFields,
  messages: ReadonlyArray<Message>,
  verdicts: ReadonlyArray<Verdict>,
  log: LogLevel,
  startedAt: number,
  budgetMs: number
) {
  const counts = { acked: 0, retried: 0, handedBack: 0, deadLettered: 0, deadLetteredByReason: {} as Record<string, number> }
  let parkedCount = 0
  for (let i = 0; i < verdicts.length; i++) {
    const v = verdicts[i]!
    if (v._tag === "Ack") {
      counts.acked++
      if (log === "all") console.log(attemptLine(fields, messages[i]!, startedAt, "acked"))
      continue
    }
    // Retried (or parked on its last attempt) for the queue: counted as a retry, and apart.
    if (v._tag === "HandBack") {
      counts.retried++
      counts.handedBack++
      if (log === "all") console.log(attemptLine(fields, messages[i]!, startedAt, "handed_back"))
      continue
    }
    // A parked message comes back as a new one: counted as a retry, as it is one for the queue's health.
    if (v._tag === "Retry" || v._tag === "Park") {
      counts.retried++
      if (v._tag === "Park") parkedCount++
    } else {
      counts.deadLettered++
      // One count per message, under its first record's reason (as its log line): the reasons sum to `deadLettered`.
      const reason = v.records[0]?.reason ?? "unknown"
      counts.deadLetteredByReason[reason] = (counts.deadLetteredByReason[reason] ?? 0) + 1
    }
    if (log === "none") continue
    const m = messages[i]!
    if (v._tag === "Retry") console.warn(attemptLine(fields, m, startedAt, "retried", v.errorClass ?? "transient", v.error))
    else if (v._tag === "Park") console.warn(attemptLine(fields, m, startedAt, "parked", "held", v.error))
    else console.error(attemptLine(fields, m, startedAt, "dead_lettered", v.records[0]?.reason, v.records[0]?.error))
  }
  if (counts.handedBack > 0 && log !== "none") {
    console.warn(handedBackLine(fields, messages.length, counts.handedBack, (yield* Time.millis) - startedAt, budgetMs))
  }
  if (log === "batch" || log === "all") console.log(batchLine(fields, messages.length, counts, parkedCount))
  return counts
})
