/**
 * Timers: a handler, decider or processor asks for a follow-up fact at a later time, beside the facts it returns.
 *
 * ```ts
 * process: (issued) => Effect.succeed([
 *   Timer.schedule({ name: "overdue", after: "30 days", fact: InvoiceOverdue.make({ invoice_id: issued.data.invoice_id }) })
 * ])
 * // later, from another fact or message of the same stream:
 * handle: () => Effect.succeed([InvoicePaid.make({ … }), Timer.cancel("overdue")])
 * ```
 *
 * A request is recorded in the stream as a platform fact (`timer_scheduled { name, fire_at, fact }`,
 * `timer_cancelled { name }`), appended with the other facts of the decision, so the schedule is as durable
 * and as idempotent as they are: a redelivered cause derives the same `timer_scheduled` fact id, which the
 * ledger already holds. `after` counts from the cause's own time (the parent fact's, the message's
 * `created_at`), not from when it happens to be processed: a retried or late delivery schedules the same
 * `fire_at`. The ledger shard keeps the stream's pending timers and fires each once, at or after `fire_at`,
 * on its alarm: it appends `fact` to the stream (its id derived from the timer's id), and the fact is relayed
 * like any other. Timers are per stream and name: scheduling a name that is pending replaces it, `cancel`
 * drops it (a cancel with nothing pending changes nothing). The fact it fires must be one the code declares
 * in `emits`, checked when the timer is scheduled.
 *
 * This module only describes requests; the ledger (LedgerStorage) keeps and fires them.
 */
import * as Duration from "effect/Duration"
import type { NewFact } from "./FactDefinition.js"
import * as Naming from "./Naming.js"

/** Asks for `fact` to be appended to this stream at or after a time. */
export interface Schedule<F extends NewFact<string, unknown> = NewFact<string, unknown>> {
  readonly _tag: "TimerSchedule"
  readonly name: string
  /** Milliseconds after the cause's `created_at` (absent when `at` is given). */
  readonly afterMs?: number
  /** An absolute time (ISO-8601), when given instead of `after`. */
  readonly at?: string
  readonly fact: F
}

/** Drops the stream's pending timer of this name. */
export interface Cancel {
  readonly _tag: "TimerCancel"
  readonly name: string
}

export type Request<F extends NewFact<string, unknown> = NewFact<string, unknown>> = Schedule<F> | Cancel

export class TimerError extends Error {
  override readonly name = "TimerError"
}

/**
 * A timer `name` (per stream) that appends `fact` `after` a duration (`"30 days"`, `"5 seconds"`, millis, any
 * `Duration.Input`) counted from the cause's time, or `at` an absolute time.
 */
export const schedule = <F extends NewFact<string, unknown>>(
  options: { readonly name: string; readonly fact: F } & ({ readonly after: Duration.Input } | { readonly at: Date | string })
): Schedule<F> => {
  Naming.check("timer", options.name)
  if ("at" in options) {
    const ms = options.at instanceof Date ? options.at.getTime() : Date.parse(options.at)
    if (!Number.isFinite(ms)) throw new TimerError(`timer ${options.name}: at ${JSON.stringify(options.at)} is not a valid time`)
    return { _tag: "TimerSchedule", name: options.name, at: new Date(ms).toISOString(), fact: options.fact }
  }
  const duration = Duration.fromInput(options.after)
  const afterMs = duration._tag === "Some" ? Duration.toMillis(duration.value) : Number.NaN
  if (!Number.isFinite(afterMs) || afterMs < 0) throw new TimerError(`timer ${options.name}: after ${JSON.stringify(options.after)} is not a finite, non-negative duration (e.g. "30 days")`)
  return { _tag: "TimerSchedule", name: options.name, afterMs: Math.round(afterMs), fact: options.fact }
}

/** Cancels the stream's pending timer `name`, if any. */
export const cancel = (name: string): Cancel => ({ _tag: "TimerCancel", name: Naming.check("timer", name) })

export const isRequest = (u: unknown): u is Request =>
  typeof u === "object" && u !== null && ((u as { _tag?: unknown })._tag === "TimerSchedule" || (u as { _tag?: unknown })._tag === "TimerCancel")

/** The platform fact types a request is recorded as. */
export const scheduledType = "timer_scheduled"
export const cancelledType = "timer_cancelled"

/**
 * The fact a request is recorded as (PlatformFacts' `timer_scheduled` / `timer_cancelled`); `base` is the
 * cause's `created_at`, from which `after` counts. Facts that are not requests pass unchanged.
 */
export const record = <F extends NewFact<string, unknown> & { readonly schema_version?: number }>(draft: F | Request<F>, base: string): NewFact<string, unknown> & { readonly schema_version?: number } => {
  if (!isRequest(draft)) return draft
  if (draft._tag === "TimerCancel") return { type: cancelledType, data: { name: draft.name } }
  const fireAt = draft.at ?? new Date(Date.parse(base) + (draft.afterMs ?? 0)).toISOString()
  // The fact keeps the schema_version it was drafted at (its definition's latest then), so it fires in that shape.
  const { type, data, schema_version } = draft.fact
  return { type: scheduledType, data: { name: draft.name, fire_at: fireAt, fact: { type, data, ...(schema_version === undefined ? {} : { schema_version }) } } }
}
