/**
 * What the runs view reads off a message before anything is stored: the run it belongs to (`runKey`, `idOf`),
 * whether it is a "retry now" copy, whether an attempt is recorded at a level, and its trace. Pure (`idOf`
 * hashes with Web Crypto); Runs re-exports what it exported before.
 */
import { TraceContext } from "@factline/schemas"
import { outcomes } from "../api/Runs.js"

export type Level = "all" | "failures" | "none"

/** A run's outcomes, as the API describes them (`@factline/core/api`'s Runs). */
export { outcomes }
export type Outcome = (typeof outcomes)[number]

/** One attempt as the consumer runtime settled it. */
export interface Attempt {
  /** The queue's message id. */
  readonly messageId: string
  /** The queue's attempt number (1 on the first delivery). */
  readonly attempt: number
  readonly body: unknown
  readonly outcome: Exclude<Outcome, "rerun">
  readonly error?: string
  /** When the queue delivers it again (a retry or a park). */
  readonly nextRetryAt?: string
}

/** Marks a "retry now" copy's `message_id`; stripped to find its run. */
export const rerunSuffix = "~rerun"
export const field = (body: unknown, name: string): string | null => {
  if (typeof body !== "object" || body === null) return null
  const value = (body as Record<string, unknown>)[name]
  return typeof value === "string" ? value : null
}

/** The run a message belongs to: its envelope's `message_id` without the "retry now" mark, else the queue's id. */
export const runKey = (body: unknown, queueMessageId: string): string => {
  const id = field(body, "message_id")
  if (id === null || id === "") return queueMessageId
  return id.endsWith(rerunSuffix) ? id.slice(0, -rerunSuffix.length) : id
}

export const isRerun = (body: unknown): boolean => field(body, "message_id")?.endsWith(rerunSuffix) ?? false

/** Whether an attempt is recorded at this level: under `failures`, all but a first delivery's success. */
export const records = (level: Level, attempt: Attempt): boolean =>
  level === "all" || (level === "failures" && (attempt.outcome !== "ok" || attempt.attempt > 1 || isRerun(attempt.body)))

/** A run's id: the same for every attempt of the message, in every isolate. */
export const idOf = async (queue: string, key: string): Promise<string> => {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${queue}\n${key}`)))
  return `run_${Array.from(digest.subarray(0, 12), (b) => b.toString(16).padStart(2, "0")).join("")}`
}

/** The message's trace: its `traceparent`'s trace id, else that of the first fact it carries. */
export const traceOf = (body: unknown): string | null => {
  const own = TraceContext.traceId(field(body, "traceparent"))
  if (own !== undefined) return own
  const payload = typeof body === "object" && body !== null ? (body as { readonly payload?: unknown }).payload : undefined
  if (typeof payload !== "object" || payload === null) return null
  const { facts, fact } = payload as { readonly facts?: unknown; readonly fact?: unknown }
  const first = Array.isArray(facts) ? facts[0] : fact
  return TraceContext.traceId(typeof first === "object" && first !== null ? (first as { readonly traceparent?: unknown }).traceparent : undefined) ?? null
}

export const short = (value: string | null, max = 256) => (value === null ? null : value.slice(0, max))
