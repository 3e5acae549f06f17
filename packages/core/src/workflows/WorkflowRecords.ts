/**
 * The operators' index of workflow instances (table `workflow_instances` of the platform database): written
 * when a fact starts an instance (`queued`, in the consumer's batch), by the instance as it moves (the step it is
 * on and its attempts, what it waits for and until when, the facts it appended) and when it ends; read by
 * `GET /v1/workflows`, the dashboard and the CLI. Cloudflare Workflows keeps the instance itself (its binding
 * has no list), so this is what lists them; `show` joins Cloudflare's own status to it. Tenant-scoped like
 * runs: a tenant's admin reads its own, the platform scope every tenant's. Pruned by Maintenance once ended.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Failure from "../failures/Failure.js"
import * as Sql from "../platform/Sql.js"
import * as Time from "../platform/Time.js"
import * as Cursor from "../tables/Cursor.js"
import { InstanceSchema, statuses } from "../api/Workflows.js"

/** The statuses and the row of an instance, as the API describes them (`@factline/core/api`'s Workflows). */
export { statuses }
export type Status = (typeof statuses)[number]

export const Instance = InstanceSchema
export type Instance = typeof Instance.Type

const Row = Schema.Struct({ ...Instance.fields, facts: Schema.fromJsonString(Schema.Array(Schema.String)) })
const columns = "tenant_id, instance_id, workflow, subject, start_fact_id, status, step, attempts, waiting_for, wait_until, facts, error, traceparent, started_at, updated_at"

export interface Start {
  readonly tenant_id: string
  readonly instance_id: string
  readonly workflow: string
  readonly subject: string
  readonly start_fact_id: string
  readonly traceparent: string | null
}

/** A move of an instance: any of its columns that change. */
export interface Move {
  readonly status?: Status
  readonly step?: string | null
  readonly waiting_for?: string | null
  readonly wait_until?: string | null
  readonly error?: string | null
}

export interface Filters {
  readonly workflow?: string
  readonly status?: Status
  readonly subject?: string
}

/** Whose instances a reader sees: one tenant's, or (null) every tenant's. */
export interface Scope {
  readonly tenantId: string | null
}

export class WorkflowRecords extends Context.Service<WorkflowRecords, {
  /** The statements recording started instances (`INSERT OR IGNORE`: a repeated start changes nothing), for the caller's batch. */
  readonly queuedStatements: (starts: ReadonlyArray<Start>, now: string) => ReadonlyArray<Sql.Statement>
  readonly record: (starts: ReadonlyArray<Start>) => Effect.Effect<void, Failure.Unavailable>
  readonly move: (tenantId: string, instanceId: string, move: Move) => Effect.Effect<void, Failure.Unavailable>
  /** A new run of the instance (a retry or a replayed dead letter): queued again, its error cleared, `started_at` now. */
  readonly restarted: (tenantId: string, instanceId: string) => Effect.Effect<void, Failure.Unavailable>
  /** One attempt of `step` (the count restarts at 1 when the step changes). */
  readonly attempt: (tenantId: string, instanceId: string, step: string) => Effect.Effect<void, Failure.Unavailable>
  /** Adds fact ids to the instance's appended facts (each once). */
  readonly appended: (tenantId: string, instanceId: string, factIds: ReadonlyArray<string>) => Effect.Effect<void, Failure.Unavailable>
  /** Instances sleeping or waiting whose time passed before `before` (ISO-8601): at most `limit`, the oldest first. */
  readonly overdue: (before: string, limit: number) => Effect.Effect<ReadonlyArray<Instance>, Failure.Unavailable>
  readonly list: (scope: Scope, filters: Filters, page: { readonly limit: number; readonly cursor?: string }) => Effect.Effect<{ readonly data: ReadonlyArray<Instance>; readonly next_cursor: string | null }, Failure.Unavailable | Failure.InvalidInput>
  readonly get: (scope: Scope, instanceId: string) => Effect.Effect<Instance, Failure.Unavailable | Failure.NotFound>
}>()("@factline/core/WorkflowRecords") {
  static readonly layer = Layer.effect(WorkflowRecords, Effect.gen(function*() {
    return make(yield* Sql.PlatformDatabase)
  }))
}

export const make = (sql: Sql.Sql): WorkflowRecords["Service"] => {
  const unavailable = (error: Sql.SqlFailure) => new Failure.Unavailable({ service: "d1", message: error.message })
  const queuedStatements = (starts: ReadonlyArray<Start>, now: string) =>
    starts.map((s) => Sql.statement(
      "INSERT OR IGNORE INTO workflow_instances (tenant_id, instance_id, workflow, subject, start_fact_id, status, traceparent, started_at, updated_at) VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?)",
      s.tenant_id, s.instance_id, s.workflow, s.subject, s.start_fact_id, s.traceparent, now, now
    ))
  const scoped = (scope: Scope) => (scope.tenantId === null ? { clause: "", params: [] as Array<unknown> } : { clause: " AND tenant_id = ?", params: [scope.tenantId] })
  return {
    queuedStatements,
    record: Effect.fn("WorkflowRecords.record")(function*(starts) {
      if (starts.length === 0) return
      const now = yield* Time.now
      yield* sql.batch(queuedStatements(starts, now)).pipe(Effect.mapError(unavailable))
    }),
    move: Effect.fn("WorkflowRecords.move")(function*(tenantId, instanceId, move) {
      const now = yield* Time.now
      const set = Object.entries(move).filter(([, value]) => value !== undefined)
      yield* sql.run(Sql.statement(
        `UPDATE workflow_instances SET ${[...set.map(([column]) => `${column} = ?`), "updated_at = ?"].join(", ")} WHERE tenant_id = ? AND instance_id = ?`,
        ...set.map(([, value]) => value), now, tenantId, instanceId
      )).pipe(Effect.mapError(unavailable))
    }),
    restarted: Effect.fn("WorkflowRecords.restarted")(function*(tenantId, instanceId) {
      const now = yield* Time.now
      yield* sql.run(Sql.statement(
        "UPDATE workflow_instances SET status = 'queued', error = NULL, step = NULL, attempts = 0, waiting_for = NULL, wait_until = NULL, started_at = ?, updated_at = ? WHERE tenant_id = ? AND instance_id = ?",
        now, now, tenantId, instanceId
      )).pipe(Effect.mapError(unavailable))
    }),
    attempt: Effect.fn("WorkflowRecords.attempt")(function*(tenantId, instanceId, step) {
      const now = yield* Time.now
      yield* sql.run(Sql.statement(
        "UPDATE workflow_instances SET attempts = CASE WHEN step = ? THEN attempts + 1 ELSE 1 END, step = ?, status = 'running', waiting_for = NULL, wait_until = NULL, updated_at = ? WHERE tenant_id = ? AND instance_id = ?",
        step, step, now, tenantId, instanceId
      )).pipe(Effect.mapError(unavailable))
    }),
    appended: Effect.fn("WorkflowRecords.appended")(function*(tenantId, instanceId, factIds) {
      if (factIds.length === 0) return
      const now = yield* Time.now
      yield* sql.run(Sql.statement(
        "UPDATE workflow_instances SET facts = (SELECT json_group_array(value) FROM (SELECT value FROM json_each(facts) UNION SELECT value FROM json_each(?))), updated_at = ? WHERE tenant_id = ? AND instance_id = ?",
        JSON.stringify(factIds), now, tenantId, instanceId
      )).pipe(Effect.mapError(unavailable))
    }),
    overdue: Effect.fn("WorkflowRecords.overdue")(function*(before, limit) {
      return yield* sql.all(Row, Sql.statement(
        `SELECT ${columns} FROM workflow_instances WHERE status IN ('sleeping', 'waiting') AND wait_until < ? ORDER BY wait_until LIMIT ?`,
        before, limit
      )).pipe(Effect.mapError(unavailable))
    }),
    list: Effect.fn("WorkflowRecords.list")(function*(scope, filters, page) {
      const clauses: Array<string> = []
      const params: Array<unknown> = []
      if (scope.tenantId !== null) clauses.push("tenant_id = ?"), params.push(scope.tenantId)
      if (filters.workflow !== undefined) clauses.push("workflow = ?"), params.push(filters.workflow)
      if (filters.status !== undefined) clauses.push("status = ?"), params.push(filters.status)
      if (filters.subject !== undefined) clauses.push("subject = ?"), params.push(filters.subject)
      if (page.cursor !== undefined) {
        const after = Cursor.decode(page.cursor, ["string", "string"])
        if (after === undefined) return yield* new Failure.InvalidInput({ code: "invalid_query", message: "cursor: not a cursor of this listing", problems: [{ path: "cursor", message: "is not a cursor of this listing" }] })
        clauses.push("(updated_at < ? OR (updated_at = ? AND instance_id < ?))"), params.push(after[0], after[0], after[1])
      }
      const rows = yield* sql.all(Row, Sql.statement(
        `SELECT ${columns} FROM workflow_instances${clauses.length === 0 ? "" : ` WHERE ${clauses.join(" AND ")}`} ORDER BY updated_at DESC, instance_id DESC LIMIT ?`,
        ...params, page.limit + 1
      )).pipe(Effect.mapError(unavailable))
      const data = rows.slice(0, page.limit)
      const last = data[data.length - 1]
      return { data, next_cursor: rows.length > page.limit && last !== undefined ? Cursor.encode([last.updated_at, last.instance_id]) : null }
    }),
    get: Effect.fn("WorkflowRecords.get")(function*(scope, instanceId) {
      const row = yield* sql.first(Row, Sql.statement(`SELECT ${columns} FROM workflow_instances WHERE instance_id = ?${scoped(scope).clause}`, instanceId, ...scoped(scope).params)).pipe(Effect.mapError(unavailable))
      if (row === undefined) return yield* new Failure.NotFound({ message: `no workflow instance ${instanceId}` })
      return row
    })
  }
}
