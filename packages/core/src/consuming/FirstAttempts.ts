/**
 * When each retried queue message was first attempted (table `first_attempts`, the platform database), so
 * that its dead letter's `first_attempted_at` is the first processing attempt — not the time it was sent.
 *
 * A message cannot carry it: `retry()` redelivers the body unchanged, and the queue's `timestamp` is when the
 * message was sent (a backlog or a send delay earlier). So the consumer runtime records it here at the first
 * attempt that ends in a retry, and reads it back when the message is dead-lettered on a later attempt. Only
 * failing batches pay: one statement for the batch's first retries, one lookup for its dead letters after
 * retries; a batch that acks everything (or fails for good on its first attempt, whose time it knows) writes
 * and reads nothing here. Writing is best effort: when the platform database refuses (an outage is the
 * commonest reason for a retry), the retry goes ahead and the dead letter falls back to the send time, the
 * earliest the first attempt can have been.
 *
 * It does not decide retries or dead letters (the consumer runtime does) and does not keep the inbox's
 * per-key state (`Inbox.ts`, whose `first_seen_at` the batch queue uses instead).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Failure from "../failures/Failure.js"
import * as Sql from "../platform/Sql.js"

export interface Entry {
  readonly messageId: string
  readonly firstAttemptedAt: string
}

export class FirstAttempts extends Context.Service<FirstAttempts, {
  /** Records the first attempt of each message (a message already recorded keeps its time). */
  readonly record: (queue: string, entries: ReadonlyArray<Entry>) => Effect.Effect<void, Sql.SqlFailure>
  /** The recorded first attempts of these messages, by message id (the unrecorded ones are absent). */
  readonly lookup: (queue: string, messageIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, string>, Sql.SqlFailure>
}>()("@factline/core/FirstAttempts") {
  /** Over the platform database's door. */
  static readonly layer = Layer.effect(FirstAttempts, Effect.map(Effect.service(Sql.PlatformDatabase), (sql) => make(sql)))
}

/** Queues keep a message at most 14 days (Cloudflare's longest retention): a record older than that is never read. */
export const retentionDays = 14

const unavailable = Failure.unavailable("the platform database")

/**
 * The statements that record these first attempts (none for none): what `record` runs, and what the consumer
 * runtime sends in the same round trip as its runs (Runs.record) when it records both.
 */
export const statements = (queue: string, entries: ReadonlyArray<Entry>): Array<Sql.Statement> =>
  // 2 parameters per row + 1 shared: 49 rows per statement stays under D1's 100.
  Sql.chunks(entries, 49).map((rows) =>
    Sql.statement(
      `INSERT INTO first_attempts (queue, message_id, first_attempted_at)
       VALUES ${rows.map((_, i) => `(?1, ?${i * 2 + 2}, ?${i * 2 + 3})`).join(", ")}
       ON CONFLICT (queue, message_id) DO NOTHING`,
      queue, ...rows.flatMap((r) => [r.messageId, r.firstAttemptedAt])
    ))

const Recorded = Schema.Struct({ message_id: Schema.String, first_attempted_at: Schema.String })

export const make = (sql: Sql.Sql): FirstAttempts["Service"] => ({
  record: Effect.fn("FirstAttempts.record")(function*(queue, entries) {
    if (entries.length === 0) return
    yield* sql.batch(statements(queue, entries)).pipe(Effect.mapError(unavailable))
  }),
  lookup: Effect.fn("FirstAttempts.lookup")(function*(queue, messageIds) {
    if (messageIds.length === 0) return new Map<string, string>()
    const statements = Sql.chunks(messageIds, 98).map((ids) =>
      Sql.statement(
        `SELECT message_id, first_attempted_at FROM first_attempts WHERE queue = ?1 AND message_id IN (${ids.map((_, i) => `?${i + 2}`).join(", ")})`,
        queue, ...ids
      ))
    const results = yield* sql.batch(statements, Recorded).pipe(Effect.mapError(unavailable))
    return new Map(results.flatMap((r) => r.rows).map((row) => [row.message_id, row.first_attempted_at]))
  })
})

/** Forgets records older than `before`, oldest first, at most `limit`; how many. By rowid: bounded and indexed. */
export const prune = (before: string, limit: number) =>
  Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) =>
    sql.run(Sql.statement(
      "DELETE FROM first_attempts WHERE rowid IN (SELECT rowid FROM first_attempts WHERE first_attempted_at < ? ORDER BY first_attempted_at LIMIT ?)",
      before, limit
    )))
