/**
 * The inbox: what a consumer has already done, by `(queue, idempotency_key)`.
 * Kept only by queues whose work is not idempotent by construction (batch);
 * the events, fact-processing and projections paths rely on the ledger's
 * deterministic fact ids and the projections' guarded writes instead.
 *
 * Two D1 round trips per batch whatever its size: `begin` registers every key
 * of the batch (new keys become `processing`, attempts counted) and returns
 * their status in the same statement; `finish` records each outcome. A
 * `succeeded` key is acked without work; a `failed` one runs again when it is
 * delivered again with the same key. Statements are chunked to stay under D1's
 * 100 bound parameters and sent together in one `batch()`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Sql from "../platform/Sql.js"
import * as Failure from "../failures/Failure.js"

export type Status = "processing" | "succeeded" | "failed"

/** A key's row as `begin` returns it. */
export const Entry = Schema.Struct({
  idempotency_key: Schema.String,
  status: Schema.Literals(["processing", "succeeded", "failed"]),
  attempts: Schema.Number,
  first_seen_at: Schema.String
})
export type Entry = typeof Entry.Type

export interface Outcome {
  readonly idempotency_key: string
  readonly status: "succeeded" | "failed"
  readonly last_error: string | null
}

export class Inbox extends Context.Service<Inbox, {
  /** Registers the batch's keys and returns their status. */
  readonly begin: (queue: string, keys: ReadonlyArray<string>, now: string) => Effect.Effect<ReadonlyMap<string, Entry>, Sql.SqlFailure>
  readonly finish: (queue: string, outcomes: ReadonlyArray<Outcome>, now: string) => Effect.Effect<void, Sql.SqlFailure>
}>()("@factline/core/Inbox") {
  /** Over the platform database's door. */
  static readonly layer = Layer.effect(Inbox, Effect.map(Effect.service(Sql.PlatformDatabase), (sql) => make(sql)))
}

const unavailable = Failure.unavailable("the inbox")

export const make = (sql: Sql.Sql): Inbox["Service"] => ({
  begin: Effect.fn("Inbox.begin")(function*(queue, keys, now) {
    if (keys.length === 0) return new Map<string, Entry>()
    // 1 parameter per row + 2 shared: 98 rows per statement stays under 100.
    const statements = Sql.chunks(keys, 98).map((rows) =>
      Sql.statement(
          `INSERT INTO inbox (queue, idempotency_key, status, attempts, last_error, first_seen_at, updated_at)
           VALUES ${rows.map((_, i) => `(?1, ?${i + 3}, 'processing', 1, NULL, ?2, ?2)`).join(", ")}
           ON CONFLICT (queue, idempotency_key) DO UPDATE SET
             status = CASE WHEN inbox.status = 'succeeded' THEN 'succeeded' ELSE 'processing' END,
             attempts = CASE WHEN inbox.status = 'succeeded' THEN inbox.attempts ELSE inbox.attempts + 1 END,
             updated_at = CASE WHEN inbox.status = 'succeeded' THEN inbox.updated_at ELSE excluded.updated_at END
           RETURNING idempotency_key, status, attempts, first_seen_at`,
        queue, now, ...rows
      )
    )
    return yield* sql.batch(statements, Entry).pipe(
      Effect.map((results) => new Map(results.flatMap((r) => r.rows).map((e) => [e.idempotency_key, e]))),
      Effect.mapError(unavailable)
    )
  }),
  finish: Effect.fn("Inbox.finish")(function*(queue, outcomes, now) {
    if (outcomes.length === 0) return
    // 3 parameters per row + 2 shared: 32 rows per statement.
    const statements = Sql.chunks(outcomes, 32).map((rows) =>
      Sql.statement(
          `INSERT INTO inbox (queue, idempotency_key, status, attempts, last_error, first_seen_at, updated_at)
           VALUES ${rows.map((_, i) => `(?1, ?${i * 3 + 3}, ?${i * 3 + 4}, 1, ?${i * 3 + 5}, ?2, ?2)`).join(", ")}
           ON CONFLICT (queue, idempotency_key) DO UPDATE SET
             status = CASE WHEN inbox.status = 'succeeded' THEN 'succeeded' ELSE excluded.status END,
             last_error = CASE WHEN inbox.status = 'succeeded' THEN inbox.last_error ELSE excluded.last_error END,
             updated_at = excluded.updated_at`,
        queue, now, ...rows.flatMap((o) => [o.idempotency_key, o.status, o.last_error])
      )
    )
    yield* sql.batch(statements).pipe(Effect.mapError(unavailable))
  })
})

/** Forgets succeeded rows last updated before `before`, oldest first, at most `limit`; how many. By rowid: bounded and indexed by `updated_at`. */
export const prune = (before: string, limit: number) =>
  Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) =>
    sql.run(Sql.statement(
      "DELETE FROM inbox WHERE rowid IN (SELECT rowid FROM inbox WHERE status = 'succeeded' AND updated_at < ? ORDER BY updated_at LIMIT ?)",
      before, limit
    )))
