/**
 * The runs view: every queue message's attempts as they happen — its queue, type, subject, tenant, the
 * attempt, its outcome (`ok`, `retry`, `park`, `dead`), the error, when it is retried next and its trace —
 * in table `runs` of the platform database, one row per message (a run), updated by each recorded attempt.
 * Bounded (Maintenance prunes it by age and by count) and tenant-scoped (a tenant's admin reads its own
 * runs; the platform scope every tenant's). Not the log stream: it answers "what is retrying right now".
 *
 * What is recorded (`FACTLINE_RUNS`): `failures` (the default) records every attempt that does not succeed at
 * once — a retry, a park, a dead letter — and every later attempt of such a message (a redelivery, a "retry
 * now" copy), so a run that recovers shows `ok`; a message that succeeds on its first delivery, the bulk of
 * the traffic, costs nothing here. `all` (what `npm run dev` sets) records every attempt; `none` nothing.
 * A batch with something to record writes it in one round trip, together with its first attempts
 * (FirstAttempts' statements); a batch whose messages all succeed at once writes nothing under `failures`.
 *
 * A run is keyed by its queue and the envelope's `message_id` (the queue's message id for a body without
 * one): a redelivery, a park's re-send and a "retry now" copy land on the same row. "Retry now"
 * (`retryNow`) sends a copy of a waiting message at once — its body is kept while the run may be retried,
 * at most `maxKeptBodyBytes` — with `rerunSuffix` on its `message_id`, so that the copy's first attempt is
 * recorded even under `failures`; the message's own later delivery is harmless (idempotency keys and
 * fact ids make the work happen once). A dead run is not re-sent here: its dead letter is replayed.
 *
 * It does not decide verdicts (the consumer runtime does) and does not keep dead letters (DeadLetterStore).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { isRealDateTime, type Issues } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import * as Sql from "../platform/Sql.js"
import * as Time from "../platform/Time.js"
import * as DataSubject from "../personal/DataSubject.js"
import { Queues } from "../platform/Queues.js"
import * as Cursor from "../tables/Cursor.js"
import * as QueueGroups from "./QueueGroups.js"
import * as RetryPolicy from "./RetryPolicy.js"
import { type Attempt, field, idOf, type Level, type Outcome, outcomes, records, rerunSuffix, runKey, short, traceOf } from "./RunKeys.js"

export { type Attempt, idOf, isRerun, type Level, type Outcome, outcomes, records, rerunSuffix, runKey } from "./RunKeys.js"

/** A run as the API answers it. */
export interface Run {
  readonly id: string
  readonly queue: string
  readonly message_id: string
  readonly tenant_id: string | null
  readonly message_type: string | null
  readonly subject: string | null
  readonly idempotency_key: string | null
  readonly trace_id: string | null
  /** The queue's number of the latest attempt (a "retry now" copy starts at 1 again). */
  readonly attempt: number
  /** Attempts recorded for this run, every delivery and copy together. */
  readonly attempts: number
  readonly outcome: Outcome
  readonly error: string | null
  readonly next_retry_at: string | null
  readonly first_attempted_at: string
  readonly updated_at: string
  /** Whether "retry now" can send it (its message is kept and it has not settled). */
  readonly can_retry: boolean
}

export interface Filters {
  readonly queue?: string
  readonly type?: string
  readonly outcome?: string
  readonly subject?: string
  /** Runs updated at or after this time (ISO-8601). */
  readonly since?: string
}

/** Who may see what: a tenant's own runs, or (`null`) every tenant's (the platform scope). */
export interface Scope {
  readonly tenantId: string | null
}

/** A body kept for "retry now" is at most this large (serialised); a larger one is retried on its schedule only. */
export const maxKeptBodyBytes = 64 * 1024
/** And one batch keeps at most this much, so a failing batch's one write stays small. */
export const maxKeptBytesPerBatch = 512 * 1024
/** The error text kept per run. */
export const maxErrorLength = 1_000
/** Runs not updated for this long are pruned. */
export const retentionDays = 7
/** At most this many runs are kept (the least recently updated beyond it are pruned). */
export const maxRuns = 100_000

const unavailable = Failure.unavailable("the runs store")

/** A run's row as `columns` reads it (`kept`: whether its body is kept). */
const Row = Schema.Struct({
  id: Schema.String,
  queue: Schema.String,
  message_id: Schema.String,
  tenant_id: Schema.NullOr(Schema.String),
  message_type: Schema.NullOr(Schema.String),
  subject: Schema.NullOr(Schema.String),
  idempotency_key: Schema.NullOr(Schema.String),
  trace_id: Schema.NullOr(Schema.String),
  attempt: Schema.Number,
  attempts: Schema.Number,
  outcome: Schema.Literals(outcomes),
  error: Schema.NullOr(Schema.String),
  next_retry_at: Schema.NullOr(Schema.String),
  first_attempted_at: Schema.String,
  updated_at: Schema.String,
  kept: Schema.Number
})
type Row = typeof Row.Type

const Claimed = Schema.Struct({ body: Schema.String })

const columns = `id, queue, message_id, tenant_id, message_type, subject, idempotency_key, trace_id, attempt, attempts, outcome, error,
  next_retry_at, first_attempted_at, updated_at, body IS NOT NULL AS kept`

const toRun = ({ kept, ...row }: Row): Run => ({ ...row, can_retry: kept === 1 && (row.outcome === "retry" || row.outcome === "park" || row.outcome === "rerun") })

/** Parameters per recorded attempt (two more are shared by a statement: the queue and the time). */
const perRow = 13
const rowsPerStatement = Math.floor((100 - 2) / perRow)

export class Runs extends Context.Service<Runs, {
  /**
   * Records settled attempts of one batch (only those `records` keeps at `level`), with `alongside` — other
   * statements of the same batch's bookkeeping — in one round trip; nothing to write, no round trip.
   */
  readonly record: (queue: string, level: Level, attempts: ReadonlyArray<Attempt>, alongside?: ReadonlyArray<Sql.Statement>) => Effect.Effect<void, Sql.SqlFailure>
  /** Runs matching the filters, the most recently updated first, a page at a time. */
  readonly list: (scope: Scope, filters: Filters, page: { readonly cursor?: string; readonly limit: number }) => Effect.Effect<{ readonly data: ReadonlyArray<Run>; readonly next_cursor: string | null }, Failure.InvalidInput | Sql.SqlFailure>
  readonly get: (scope: Scope, id: string) => Effect.Effect<Run, Failure.NotFound | Sql.SqlFailure>
  /** The kept message of a run that can be retried now, and marks it `rerun` (only while it still waits). */
  readonly claimRerun: (scope: Scope, id: string) => Effect.Effect<{ readonly run: Run; readonly body: unknown }, Failure.NotFound | Failure.Conflict | Sql.SqlFailure>
}>()("@factline/core/Runs") {
  /** Over the platform database's door. */
  static readonly layer = Layer.effect(Runs, Effect.map(Effect.service(Sql.PlatformDatabase), (sql) => make(sql)))
}

/** Checks the list filters; problems name the parameter. */
export const validateFilters = (filters: Filters): ReadonlyArray<Issues.Problem> => {
  const problems: Array<Issues.Problem> = []
  const queues = RetryPolicy.all.map((p) => p.queue)
  if (filters.queue !== undefined && !queues.includes(filters.queue)) problems.push({ path: "queue", message: `must be one of ${queues.join(", ")}` })
  if (filters.outcome !== undefined && !(outcomes as ReadonlyArray<string>).includes(filters.outcome)) problems.push({ path: "outcome", message: `must be one of ${outcomes.join(", ")}` })
  if (filters.since !== undefined && !isRealDateTime(filters.since)) {
    problems.push({ path: "since", message: "must be an ISO-8601 time, e.g. 2026-11-24T08:00:00Z" })
  }
  for (const name of ["type", "subject"] as const) {
    if (filters[name] !== undefined && (filters[name]!.length === 0 || filters[name]!.length > 256)) problems.push({ path: name, message: "must be 1 to 256 characters" })
  }
  return problems
}

export const make = (sql: Sql.Sql): Runs["Service"] => {
  const scoped = (scope: Scope) => (scope.tenantId === null ? { clause: "", params: [] as Array<unknown> } : { clause: " AND tenant_id = ?", params: [scope.tenantId] as Array<unknown> })
  const get = (scope: Scope, id: string) =>
    Effect.flatMap(
      Effect.mapError(sql.first(Row, Sql.statement(`SELECT ${columns} FROM runs WHERE id = ?${scoped(scope).clause}`, id, ...scoped(scope).params)), unavailable),
      (row) => row === undefined ? Effect.fail(new Failure.NotFound({ message: `no run ${id} for this token` })) : Effect.succeed(toRun(row))
    )
  return {
    record: Effect.fn("Runs.record")(function*(queue, level, attempts, alongside = []) {
      const now = yield* Time.now
      const dataSubjectOf = yield* DataSubject.current
      let keptBytes = 0
      const byId = new Map<string, ReadonlyArray<unknown>>()
      for (const a of attempts) {
        if (!records(level, a)) continue
        const id = yield* Effect.promise(() => idOf(queue, runKey(a.body, a.messageId)))
        let body: string | null = null
        if (a.outcome === "retry" || a.outcome === "park") {
          const text = JSON.stringify(a.body) ?? null
          if (text !== null && text.length <= maxKeptBodyBytes && keptBytes + text.length <= maxKeptBytesPerBatch) {
            body = text
            keptBytes += text.length
          }
        }
        // A run seen twice in one batch (a copy beside its original) keeps the later attempt.
        byId.set(id, [
          id, runKey(a.body, a.messageId).slice(0, 256), short(field(a.body, "tenant_id")), short(field(a.body, "message_type")), short(field(a.body, "subject")),
          short(field(a.body, "idempotency_key")), traceOf(a.body), a.attempt, a.outcome, a.error === undefined ? null : a.error.split("\n")[0]!.slice(0, maxErrorLength),
          a.nextRetryAt ?? null, body, dataSubjectOf(a.body)
        ])
      }
      if (byId.size === 0 && alongside.length === 0) return
      const statements = Sql.chunks([...byId.values()], rowsPerStatement).map((rows) =>
        Sql.statement(
          `INSERT INTO runs (id, message_id, tenant_id, message_type, subject, idempotency_key, trace_id, attempt, outcome, error, next_retry_at, body, data_subject, queue, first_attempted_at, updated_at)
           VALUES ${rows.map((_, r) => `(${Array.from({ length: perRow }, (_, c) => `?${3 + r * perRow + c}`).join(", ")}, ?1, ?2, ?2)`).join(", ")}
           ON CONFLICT (id) DO UPDATE SET
             attempt = excluded.attempt, attempts = runs.attempts + 1, outcome = excluded.outcome, error = excluded.error,
             next_retry_at = excluded.next_retry_at, trace_id = coalesce(runs.trace_id, excluded.trace_id), updated_at = excluded.updated_at,
             data_subject = coalesce(runs.data_subject, excluded.data_subject),
             body = CASE WHEN excluded.outcome IN ('ok', 'dead') THEN NULL ELSE coalesce(excluded.body, runs.body) END`,
          queue, now, ...rows.flat()
        ))
      yield* sql.batch([...alongside, ...statements]).pipe(Effect.mapError(unavailable))
    }),

    list: Effect.fn("Runs.list")(function*(scope, filters, page) {
      const clauses: Array<string> = []
      const params: Array<unknown> = []
      if (scope.tenantId !== null) clauses.push("tenant_id = ?"), params.push(scope.tenantId)
      if (filters.queue !== undefined) clauses.push("queue = ?"), params.push(filters.queue)
      if (filters.type !== undefined) clauses.push("message_type = ?"), params.push(filters.type)
      if (filters.outcome !== undefined) clauses.push("outcome = ?"), params.push(filters.outcome)
      if (filters.subject !== undefined) clauses.push("subject = ?"), params.push(filters.subject)
      if (filters.since !== undefined) clauses.push("updated_at >= ?"), params.push(new Date(filters.since).toISOString())
      if (page.cursor !== undefined) {
        const after = Cursor.decode(page.cursor, ["string", "string"])
        if (after === undefined) return yield* new Failure.InvalidInput({ code: "invalid_query", message: "cursor: not a cursor of this listing", problems: [{ path: "cursor", message: "is not a cursor of this listing" }] })
        clauses.push("(updated_at < ? OR (updated_at = ? AND id < ?))"), params.push(after[0], after[0], after[1])
      }
      const rows = yield* sql.all(Row, Sql.statement(
        `SELECT ${columns} FROM runs${clauses.length === 0 ? "" : ` WHERE ${clauses.join(" AND ")}`} ORDER BY updated_at DESC, id DESC LIMIT ?`,
        ...params, page.limit + 1
      )).pipe(Effect.mapError(unavailable))
      const data = rows.slice(0, page.limit).map(toRun)
      const last = data[data.length - 1]
      return { data, next_cursor: rows.length > page.limit && last !== undefined ? Cursor.encode([last.updated_at, last.id]) : null }
    }),

    get: Effect.fn("Runs.get")(get),

    claimRerun: Effect.fn("Runs.claimRerun")(function*(scope, id) {
      const run = yield* get(scope, id)
      if (run.outcome === "ok") return yield* new Failure.Conflict({ code: "already_succeeded", message: `run ${id} already succeeded (attempt ${run.attempt}); there is nothing to retry` })
      if (run.outcome === "dead") {
        return yield* new Failure.Conflict({
          code: "dead_lettered",
          message: `run ${id} was dead-lettered: replay its dead letter instead (GET /v1/dlq?queue=${run.queue}${run.message_type === null ? "" : `&type=${run.message_type}`}, then POST /v1/dlq/:id/replay)`,
          details: { queue: run.queue, type: run.message_type, idempotency_key: run.idempotency_key }
        })
      }
      if (!run.can_retry) return yield* new Failure.Conflict({ code: "not_kept", message: `run ${id}'s message was not kept (larger than ${maxKeptBodyBytes / 1024} KiB); the queue retries it at ${run.next_retry_at ?? "its next delivery"}` })
      const now = yield* Time.now
      // Still waiting when marked (an attempt may have settled since it was read: one that succeeded or
      // dead-lettered it ends the retry; another retry does not matter — the copy is idempotent all the same).
      const claimed = yield* sql.first(Claimed, Sql.statement(
        "UPDATE runs SET outcome = 'rerun', updated_at = ? WHERE id = ? AND outcome IN ('retry', 'park', 'rerun') AND body IS NOT NULL RETURNING body",
        now, id
      )).pipe(Effect.mapError(unavailable))
      if (claimed === undefined) return yield* new Failure.Conflict({ message: `run ${id} settled meanwhile (it succeeded or was dead-lettered); read it again` })
      return { run: { ...run, outcome: "rerun" as const, updated_at: now }, body: JSON.parse(claimed.body) as unknown }
    })
  }
}

/**
 * "Retry now": a copy of the run's kept message sent to its queue (its tenant's group queue) at once, its
 * `message_id` marked as a copy (`rerunSuffix`, when the id has room); answers the run, marked `rerun`. A
 * failed send puts nothing back: the run keeps waiting for its own scheduled delivery.
 */
export const retryNow = Effect.fn("Runs.retryNow")(function*(scope: Scope, id: string) {
  const runs = yield* Runs
  const queues = yield* Queues
  const { run, body } = yield* runs.claimRerun(scope, id)
  const messageId = field(body, "message_id")
  const copy = messageId !== null && messageId.length + rerunSuffix.length <= 128 && typeof body === "object" && body !== null
    ? { ...(body as Record<string, unknown>), message_id: `${messageId}${rerunSuffix}` }
    : body
  const purpose = QueueGroups.purposeOf(run.queue)
  yield* queues.send(run.tenant_id === null ? QueueGroups.route(purpose, "", 1) : queues.route(purpose, run.tenant_id), [copy])
  return run
})

/** Forgets runs not updated since `before`, and the least recently updated beyond `maxRuns`; at most `limit` each. How many. */
export const prune = (before: string, limit: number, keep: number = maxRuns) =>
  Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) =>
    sql.batch([
      Sql.statement("DELETE FROM runs WHERE rowid IN (SELECT rowid FROM runs WHERE updated_at < ? ORDER BY updated_at LIMIT ?)", before, limit),
      Sql.statement("DELETE FROM runs WHERE rowid IN (SELECT rowid FROM runs ORDER BY updated_at DESC LIMIT ? OFFSET ?)", limit, keep)
    ]).pipe(Effect.map((results) => results.reduce((n, r) => n + r.changes, 0))))
