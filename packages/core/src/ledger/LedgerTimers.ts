/**
 * A ledger shard's timers (Timer.ts), in its `timers` table: kept in step with the timer facts an append writes
 * (same transaction), read for the alarm, and fired — each due timer's fact appended once, its id derived from
 * the timer's, with its outbox rows, the timer marked fired in that same transaction. The append itself is
 * LedgerStorage's (passed in); this module holds only the timers' own statements.
 */
import * as Schema from "effect/Schema"
import { type Fact, TraceContext } from "@factline/schemas"
import * as FactId from "./FactId.js"
import type { AppendGroup, AppendResult, StreamKey } from "./LedgerProtocol.js"
import { decoder, type Storage } from "./LedgerRows.js"

type Sql = Storage["sql"]

/** Timers fired per `fireDue` call; the alarm comes back at once while more are due. */
export const timersPerRun = 100

/** A timer as the shard keeps it. */
export const TimerRow = Schema.Struct({
  timer_id: Schema.String,
  tenant_id: Schema.String,
  stream: Schema.String,
  name: Schema.String,
  /** Milliseconds since the epoch. */
  fire_at: Schema.Number,
  status: Schema.Literals(["pending", "fired", "cancelled", "replaced"]),
  /** The fact that fired, cancelled or replaced it. */
  settled_by: Schema.NullOr(Schema.String)
})
export type TimerRow = typeof TimerRow.Type
const decodeTimerRow = decoder(TimerRow)
/** A due timer with what its fact needs of the `timer_scheduled` fact that scheduled it. */
const decodeDueTimer = decoder(Schema.Struct({ ...TimerRow.fields, data: Schema.String, correlation_id: Schema.String, traceparent: Schema.NullOr(Schema.String) }))
const decodeNext = decoder(Schema.Struct({ at: Schema.NullOr(Schema.Number) }))

/** What one `fireDue` call did: the facts appended (or found already appended) for due timers. */
export interface Fired {
  readonly facts: ReadonlyArray<Fact>
  /** Whether more timers were already due (the caller runs again at once). */
  readonly more: boolean
}

/** Keeps the shard's timers in step with the timer facts just appended (same transaction). */
export const applyTimerFacts = (sql: Sql, facts: ReadonlyArray<Fact>) => {
  for (const fact of facts) {
    if (fact.type !== "timer_scheduled" && fact.type !== "timer_cancelled") continue
    const data = fact.data as { readonly name: string; readonly fire_at?: string }
    sql.exec(
      "UPDATE timers SET status = ?, settled_by = ? WHERE tenant_id = ? AND stream = ? AND name = ? AND status = 'pending'",
      fact.type === "timer_scheduled" ? "replaced" : "cancelled", fact.fact_id, fact.tenant_id, fact.stream, data.name
    )
    if (fact.type === "timer_cancelled") continue
    const fireAt = Date.parse(data.fire_at ?? "")
    sql.exec(
      `INSERT INTO timers (timer_id, tenant_id, stream, name, fire_at, status) VALUES (?, ?, ?, ?, ?, 'pending')
       ON CONFLICT (timer_id) DO NOTHING`,
      fact.fact_id, fact.tenant_id, fact.stream, data.name, Number.isFinite(fireAt) ? fireAt : 0
    )
  }
}

/** The earliest `fire_at` (ms) of a pending timer, if any. */
export const nextTimerAt = (sql: Sql) =>
  decodeNext(sql.exec("SELECT MIN(fire_at) AS at FROM timers WHERE status = 'pending'").one()).at ?? undefined

/** Every timer of a stream (pending and settled), in scheduling order. */
export const timers = (sql: Sql, key: StreamKey): ReadonlyArray<TimerRow> =>
  Array.from(sql.exec("SELECT * FROM timers WHERE tenant_id = ? AND stream = ? ORDER BY rowid", key.tenant_id, key.stream), decodeTimerRow)

/**
 * Fires the timers due at `now` (ms), at most `timersPerRun`: appends their facts (through `appendAllWithin`, the
 * shard's append inside the transaction), once each, with outbox rows for `destinations`.
 */
export const fireDue = async (
  storage: Storage,
  appendAllWithin: (groups: ReadonlyArray<AppendGroup>) => Array<AppendResult>,
  now: number,
  destinations: ReadonlyArray<string>
): Promise<Fired> => {
  const sql = storage.sql
  const due = Array.from(
    sql.exec(
      `SELECT t.*, f.data, f.correlation_id, f.traceparent FROM timers t JOIN facts f ON f.fact_id = t.timer_id
       WHERE t.status = 'pending' AND t.fire_at <= ? ORDER BY t.fire_at, t.timer_id LIMIT ?`,
      now, timersPerRun + 1
    ),
    decodeDueTimer
  )
  const batch = due.slice(0, timersPerRun)
  // The fired fact's id comes from the timer's: however often this runs, the ledger holds the fact once.
  const ids = await Promise.all(batch.map((t) => FactId.make({ tenantId: t.tenant_id, cause: t.timer_id, decidedBy: "timer", position: 0 })))
  const createdAt = new Date(now).toISOString()
  const facts = storage.transactionSync(() =>
    batch.flatMap((timer, i) => {
      // Still pending? A cancel may have landed while the ids were computed.
      const claimed = sql.exec("UPDATE timers SET status = 'fired', settled_by = ? WHERE timer_id = ? AND status = 'pending' RETURNING timer_id", ids[i]!, timer.timer_id).toArray()
      if (claimed.length === 0) return []
      const scheduled = JSON.parse(timer.data) as { readonly fact: { readonly type: string; readonly data: Record<string, unknown>; readonly schema_version?: number } }
      const [result] = appendAllWithin([{
        tenant_id: timer.tenant_id,
        stream: timer.stream,
        facts: [{
          fact_id: ids[i]!,
          type: scheduled.fact.type,
          data: scheduled.fact.data,
          ...(scheduled.fact.schema_version === undefined ? {} : { schema_version: scheduled.fact.schema_version }),
          causation_id: timer.timer_id,
          correlation_id: timer.correlation_id,
          caused_by: `timer:${timer.name}`,
          created_at: createdAt,
          traceparent: TraceContext.child(timer.traceparent ?? undefined)
        }]
      }])
      if (result === undefined || result.status !== "appended" && result.status !== "duplicate") return []
      for (const fact of result.facts) {
        for (const destination of destinations) {
          sql.exec(
            "INSERT INTO outbox (fact_id, destination, created_at) VALUES (?, ?, ?) ON CONFLICT (fact_id, destination) DO NOTHING",
            fact.fact_id, destination, createdAt
          )
        }
      }
      return result.facts
    })
  )
  return { facts, more: due.length > batch.length }
}
