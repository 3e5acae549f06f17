/**
 * The consumer of every `*-dlq` queue: persists dead-letter records in D1
 * (`dead_messages`) so operators can list, inspect, replay or skip them.
 *
 * A record sent by the runtime carries its failure context; a raw message the
 * platform dead-lettered by itself (the consumer crashed on every attempt) is
 * wrapped with reason `platform_retries_exhausted`. The row id is the DLQ
 * message id, stable across redeliveries, so storing twice is a no-op. One D1
 * round trip per batch.
 */
import { Clock, Effect, Result } from "effect"
import { DeadLetterRecord, Issues } from "@factline/schemas"
import * as Predicate from "effect/Predicate"
import * as Sql from "../platform/Sql.js"
import * as Placement from "../placement/Placement.js"

const decodeRecord = Issues.decodeStrict(DeadLetterRecord)
const columns = 14
const rowsPerStatement = Math.floor(100 / columns)

const field = (message: unknown, name: string): string | null =>
  Predicate.isObject(message) && typeof (message as Record<string, unknown>)[name] === "string"
    ? ((message as Record<string, unknown>)[name] as string)
    : null

export const toRow = (queue: string, m: Message<unknown>, now: string): Array<string | number | null> => {
  const decoded = decodeRecord(m.body)
  const record: DeadLetterRecord = Result.isSuccess(decoded)
    ? decoded.success
    : {
      original_message: m.body,
      failure: {
        reason: "platform_retries_exhausted",
        last_error: "the consumer failed on every attempt without recording why",
        attempts: m.attempts,
        first_attempted_at: new Date(m.timestamp).toISOString(),
        last_attempted_at: now,
        queue: queue.replace(/-dlq$/, "")
      }
    }
  const original = record.original_message
  return [
    m.id,
    record.failure.queue,
    record.failure.reason,
    record.failure.last_error,
    record.failure.attempts,
    record.failure.first_attempted_at,
    record.failure.last_attempted_at,
    field(original, "tenant_id"),
    field(original, "message_type"),
    field(original, "idempotency_key"),
    field(original, "subject"),
    JSON.stringify(original) ?? "null",
    "open",
    now
  ]
}

/** The INSERTs of `rows`, chunked under D1's 100 bound parameters. */
const inserts = (rows: ReadonlyArray<ReadonlyArray<unknown>>) => {
  const statements: Array<Sql.Statement> = []
  for (let i = 0; i < rows.length; i += rowsPerStatement) {
    const chunk = rows.slice(i, i + rowsPerStatement)
    statements.push(
      Sql.statement(
        `INSERT INTO dead_messages (id, queue, reason, last_error, attempts, first_attempted_at, last_attempted_at,
           tenant_id, message_type, idempotency_key, subject, original_message, status, received_at)
         VALUES ${chunk.map(() => `(${new Array(columns).fill("?").join(", ")})`).join(", ")}
         ON CONFLICT (id) DO NOTHING`
      , ...chunk.flat())
    )
  }
  return statements
}

/**
 * Stores a DLQ batch: each record in its tenant's read database (Placement), a record without a tenant (its
 * body never decoded) in the platform database; one transaction per database. The batch is acked once every
 * database has its records, else retried whole (the inserts are idempotent by id).
 */
export const consume = Effect.fn("DeadLetterConsumer.consume")(function*(batch: MessageBatch<unknown>) {
  const platform = yield* Sql.PlatformDatabase
  const placement = yield* Placement.TenantPlacement
  const now = new Date(yield* Clock.currentTimeMillis).toISOString()
  const rows = batch.messages.map((m) => toRow(batch.queue, m, now))
  const tenantColumn = 7
  const tenantOf = (row: ReadonlyArray<unknown>) => row[tenantColumn]
  const stored = yield* Effect.result(Effect.gen(function*() {
    const placed = rows.filter((row) => typeof tenantOf(row) === "string")
    const groups = yield* Placement.grouped(placement, placed, (row) => tenantOf(row) as string, false)
    yield* Effect.forEach([...groups, { sql: platform, items: rows.filter((row) => typeof tenantOf(row) !== "string") }], (group) =>
      group.items.length === 0 ? Effect.void : Effect.asVoid(group.sql.batch(inserts(group.items))), { concurrency: "unbounded", discard: true })
  }))
  for (const m of batch.messages) {
    if (Result.isSuccess(stored)) m.ack()
    else m.retry({ delaySeconds: Math.min(60 * m.attempts, 600) })
  }
  if (Result.isFailure(stored)) yield* Effect.logError(`could not persist dead letters from ${batch.queue}`)
})
