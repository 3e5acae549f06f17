/**
 * The consumer of every `*-dlq` queue: persists dead-letter records in D1
 * (`dead_messages`) so operators can list, inspect, replay or skip them.
 *
 * A record sent by the runtime carries its failure context; a raw message the
 * platform dead-lettered by itself (the consumer crashed on every attempt) is
 * wrapped with reason `platform_retries_exhausted`. The row id is the DLQ
 * message id, stable across redeliveries, so storing twice is a no-op. One D1
 * round trip per database per batch.
 *
 * The DLQs have no DLQ of their own: a record D1 still refuses from delivery
 * `RetryPolicy.deadLetterConsumer.spillFromAttempt` on is spilled to R2
 * (DeadLetterSpill) and acked once the object is written — R2 refusing too
 * leaves it retried — and `recoverSpilled` (the cron) moves spilled records
 * into `dead_messages` later, keyed by the same id.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { DeadLetterRecord, Issues } from "@factline/schemas"
import * as Predicate from "effect/Predicate"
import * as Sql from "../platform/Sql.js"
import * as Placement from "../placement/Placement.js"
import * as DataSubject from "../personal/DataSubject.js"
import * as DeadLetterSpill from "./DeadLetterSpill.js"
import * as RetryPolicy from "./RetryPolicy.js"

const decodeRecord = Issues.decodeStrict(DeadLetterRecord)
/** The columns of a `dead_messages` row as `toRow` lists them. */
export const columnNames = [
  "id", "queue", "reason", "last_error", "attempts", "first_attempted_at", "last_attempted_at",
  "tenant_id", "message_type", "idempotency_key", "subject", "original_message", "status", "received_at", "stack", "data_subject"
] as const
const columns = columnNames.length
const rowsPerStatement = Math.floor(100 / columns)

const field = (message: unknown, name: string): string | null =>
  Predicate.isObject(message) && typeof (message as Record<string, unknown>)[name] === "string"
    ? ((message as Record<string, unknown>)[name] as string)
    : null

/** `dataSubjectOf`: the data subject of the original message (DataSubject.ts), recorded for its erasure. */
export const toRow = (queue: string, m: Message<unknown>, now: string, dataSubjectOf: (body: unknown) => string | null = () => null): Array<string | number | null> => {
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
    now,
    record.failure.stack ?? null,
    dataSubjectOf(original)
  ]
}

/** The INSERTs of `rows`, chunked under D1's 100 bound parameters. */
const inserts = (rows: ReadonlyArray<ReadonlyArray<unknown>>) =>
  Sql.chunks(rows, rowsPerStatement).map((chunk) =>
    Sql.statement(
      `INSERT INTO dead_messages (${columnNames.join(", ")})
       VALUES ${chunk.map(() => `(${new Array(columns).fill("?").join(", ")})`).join(", ")}
       ON CONFLICT (id) DO NOTHING`
    , ...chunk.flat()))

type Row = ReadonlyArray<string | number | null>
const tenantColumn = columnNames.indexOf("tenant_id")
const tenantOf = (row: Row) => row[tenantColumn]

/**
 * Inserts `rows`: each in its tenant's read database (Placement), a row without a tenant (its body never
 * decoded) in the platform database; one transaction per database. Returns the ids of the rows stored (the
 * inserts are idempotent by id; a tenant whose writes a move holds has none stored); fails only when the
 * placements cannot be read.
 */
export const store = Effect.fn("DeadLetterConsumer.store")(function*(rows: ReadonlyArray<Row>) {
  const platform = yield* Sql.PlatformDatabase
  const placement = yield* Placement.TenantPlacement
  const placed = rows.filter((row) => typeof tenantOf(row) === "string")
  // A tenant being moved holds its dead letters back (retried, as any unstored one) rather than writing them to
  // the database its rows are leaving.
  const { groups } = yield* Placement.groupedForWrites(placement, placed, (row) => tenantOf(row) as string)
  const all = [...groups, { sql: platform, items: rows.filter((row) => typeof tenantOf(row) !== "string") }].filter((group) => group.items.length > 0)
  const outcomes = yield* Effect.forEach(all, (group) => Effect.result(group.sql.batch(inserts(group.items))).pipe(Effect.map((result) => ({ group, result }))), { concurrency: "unbounded" })
  const stored = new Set<string>()
  for (const { group, result } of outcomes) {
    if (Result.isSuccess(result)) for (const row of group.items) stored.add(row[0] as string)
    else yield* Effect.logError(`could not persist ${group.items.length} dead letter(s) in the ${group.sql.role} database: ${result.failure.message}`)
  }
  return stored
})

/**
 * Stores a DLQ batch (`store`); each message is acked once its record is stored, else retried after
 * `min(60·n, 600)` s — or, from delivery `spillFromAttempt` on, spilled to R2 and acked (retried if R2
 * refuses too). A message retried on its last delivery is gone (the DLQs have no DLQ): it is logged by id.
 */
export const consume = Effect.fn("DeadLetterConsumer.consume")(function*(batch: MessageBatch<unknown>) {
  const now = new Date(yield* Clock.currentTimeMillis).toISOString()
  const dataSubjectOf = yield* DataSubject.current
  const rows = batch.messages.map((m) => toRow(batch.queue, m, now, dataSubjectOf))
  const stored = yield* store(rows).pipe(
    Effect.catch((error) => Effect.as(Effect.logError(`dead letters could not be placed: ${error.message}`), new Set<string>()))
  )
  const unstored = batch.messages.map((m, i) => ({ m, row: rows[i]! })).filter(({ m }) => !stored.has(m.id))
  if (unstored.length > 0) yield* Effect.logError(`could not persist ${unstored.length} dead letter(s) from ${batch.queue}`)
  const policy = RetryPolicy.deadLetterConsumer
  const spilled = yield* DeadLetterSpill.write(unstored.filter(({ m }) => m.attempts >= policy.spillFromAttempt).map(({ m, row }) => ({
    version: DeadLetterSpill.version,
    dead_letter_queue: batch.queue,
    message_id: m.id,
    attempts: m.attempts,
    spilled_at: now,
    row: Object.fromEntries(columnNames.map((name, i) => [name, row[i]!]))
  })))
  if (spilled.size > 0) yield* Effect.logWarning(`${spilled.size} dead letter(s) from ${batch.queue} spilled to R2 (${DeadLetterSpill.prefix}); the cron moves them into dead_messages`)
  for (const m of batch.messages) {
    if (stored.has(m.id) || spilled.has(m.id)) m.ack()
    else {
      if (m.attempts >= policy.maxRetries + 1) {
        const row = rows[batch.messages.indexOf(m)]!
        yield* Effect.logError(`dead letter lost: message ${m.id} of ${batch.queue} (tenant ${row[tenantColumn] ?? "none"}, idempotency key ${row[columnNames.indexOf("idempotency_key")] ?? "none"}) could be stored neither in D1 nor in R2 on its last delivery`)
      }
      m.retry({ delaySeconds: Math.min(60 * m.attempts, 600) })
    }
  }
})

/**
 * Spilled dead letters moved into D1 per cron run at most (an R2 read each: the cron's invocation shares the
 * Worker's 1,000 subrequests with its other jobs); a backlog is worked off over the next runs, 2,400 an hour.
 */
export const recoveredPerRun = 200

/** A spilled object's row in `toRow`'s column order, or undefined when a column is missing or of the wrong type. */
const rowOf = (spilled: DeadLetterSpill.Spilled): Row | undefined => {
  const numeric = new Set<string>(["attempts"])
  const nullable = new Set<string>(["tenant_id", "message_type", "idempotency_key", "subject", "stack", "data_subject"])
  // `stack` and `data_subject` are absent from objects spilled before they existed: null, as their record had none.
  const row = columnNames.map((name) => (name === "stack" || name === "data_subject" ? spilled.row[name] ?? null : spilled.row[name]))
  const ok = columnNames.every((name, i) => {
    const value = row[i]
    return numeric.has(name) ? typeof value === "number" : typeof value === "string" || (value === null && nullable.has(name))
  })
  return ok && row[0] === spilled.message_id ? (row as Row) : undefined
}

/**
 * The recovery path of spilled dead letters (the cron): at most `limit` objects are read, their rows inserted
 * as the consumer inserts them (idempotent by id: a record stored meanwhile, or by a run that crashed before
 * its delete, is not doubled), and only then are the objects of the stored rows deleted. D1 or R2 refusing
 * leaves the objects for the next run; an object that is not a spilled dead letter is left and logged.
 * Returns how many were recovered.
 */
export const recoverSpilled = Effect.fn("DeadLetterConsumer.recoverSpilled")(function*(limit: number = recoveredPerRun) {
  const keys = yield* DeadLetterSpill.keys(limit)
  if (keys.length === 0) return 0
  const objects = yield* Effect.forEach(keys, (key) => Effect.map(DeadLetterSpill.read(key), (spilled) => ({ key, spilled })), { concurrency: 6 })
  const found: Array<{ readonly key: string; readonly row: Row }> = []
  for (const { key, spilled } of objects) {
    if (spilled === undefined) continue
    const row = spilled === "invalid" ? undefined : rowOf(spilled)
    if (row === undefined) yield* Effect.logError(`${key} is not a spilled dead letter; left in place for an operator`)
    else found.push({ key, row })
  }
  if (found.length === 0) return 0
  const stored = yield* store(found.map((f) => f.row))
  const recovered = found.filter((f) => stored.has(f.row[0] as string)).map((f) => f.key)
  yield* DeadLetterSpill.remove(recovered)
  return recovered.length
})
