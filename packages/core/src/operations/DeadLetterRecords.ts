/**
 * A dead letter as stored and shown (DeadLetterStore): its statuses, rows and scope, the list's filters and how
 * they become a WHERE clause, its keyset cursor, and the store's shape. Pure; DeadLetterStore re-exports what it
 * exported.
 */
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { Issues } from "@factline/schemas"
import type { Queues, SendFailed } from "../platform/Queues.js"
import type { Workflows } from "../platform/Workflows.js"
import type { WorkflowRecords } from "../workflows/WorkflowRecords.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as Cursor from "../tables/Cursor.js"
import * as Described from "../api/DeadLetters.js"
import type * as Failure from "../failures/Failure.js"

/** A dead letter's statuses, as the API describes them (`@factline/core/api`'s DeadLetters). */
export const statuses = Described.statuses
export type Status = (typeof statuses)[number]

/** Who may see what: a tenant's own records, or (`null`) every tenant's (the platform scope). */
export type Scope = { readonly tenantId: string | null; readonly actor: string }

/** A dead letter as the list shows it (its row in `dead_messages`, without the message, stack and history): the API's `DeadLetter`. */
export const Summary = Described.DeadLetter
export type Summary = typeof Summary.Type

/** The whole row: the summary, the stack, the original message and the history, as stored (JSON text). */
export const DetailRow = Schema.Struct({ ...Summary.fields, stack: Schema.NullOr(Schema.String), original_message: Schema.String, history: Schema.String })
export const Claimable = Schema.Struct({ id: Schema.String, queue: Schema.String, tenant_id: Schema.NullOr(Schema.String), original_message: Schema.String })
export const TenantKey = Schema.Struct({ tenant_id: Schema.String, idempotency_key: Schema.String })
export const Id = Schema.Struct({ id: Schema.String })
export const Found = Schema.Struct({ found: Schema.Number })

export interface Detail extends Summary {
  /** A defect's stack (reason `defect`); null for every other failure. Not in the list: it can be kilobytes. */
  readonly stack: string | null
  readonly original_message: unknown
  readonly history: ReadonlyArray<{ readonly at: string; readonly action: string; readonly by: string; readonly note?: string; readonly operation_id?: string }>
}

export interface Filters {
  readonly queue?: string
  readonly status?: string
  readonly type?: string
  readonly reason?: string
}


export const summaryColumns = `id, queue, status, reason, last_error, attempts, tenant_id, message_type, idempotency_key, subject, first_attempted_at,
  last_attempted_at, received_at, resolved_by, resolved_at, replay_operation_id`

/** Checks the list filters (and status defaults); problems name the parameter. */
export const validateFilters = (filters: Filters, defaultStatus?: Status): { readonly ok: true; readonly filters: Filters } | { readonly ok: false; readonly problems: ReadonlyArray<Issues.Problem> } => {
  const problems: Array<Issues.Problem> = []
  const queues = [...RetryPolicy.all.map((p) => p.queue), "factline-workflows"]
  if (filters.queue !== undefined && !queues.includes(filters.queue)) problems.push({ path: "queue", message: `must be one of ${queues.join(", ")}` })
  if (filters.status !== undefined && !statuses.includes(filters.status as Status)) problems.push({ path: "status", message: `must be one of ${statuses.join(", ")}` })
  for (const key of ["type", "reason"] as const) {
    const v = filters[key]
    if (v !== undefined && (v.length === 0 || v.length > 200)) problems.push({ path: key, message: "must be 1 to 200 characters" })
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, filters: { ...filters, status: filters.status ?? defaultStatus } }
}

export const where = (scope: Scope, filters: Filters) => {
  const clauses: Array<string> = []
  const params: Array<unknown> = []
  if (scope.tenantId !== null) clauses.push("tenant_id = ?"), params.push(scope.tenantId)
  if (filters.queue !== undefined) clauses.push("queue = ?"), params.push(filters.queue)
  if (filters.status !== undefined) clauses.push("status = ?"), params.push(filters.status)
  if (filters.type !== undefined) clauses.push("message_type = ?"), params.push(filters.type)
  if (filters.reason !== undefined) clauses.push("reason = ?"), params.push(filters.reason)
  return { sql: clauses.length > 0 ? `WHERE ${clauses.join(" AND ")}` : "", params }
}

export const encodeCursor = (receivedAt: string, id: string) => Cursor.encode([receivedAt, id])
export const decodeCursor = (cursor: string) => Cursor.decode(cursor, ["string", "string"]) as [string, string] | undefined

/** The store over one database (the one in scope, for callers: `DeadLetterStore`). */
export interface Shape {
  readonly list: (scope: Scope, filters: Filters, page: { readonly cursor?: string; readonly limit: number }) => Effect.Effect<{ readonly data: ReadonlyArray<Summary>; readonly next_cursor: string | null }, Failure.Any>
  readonly get: (scope: Scope, id: string) => Effect.Effect<Detail, Failure.Any>
  readonly replay: (scope: Scope, id: string) => Effect.Effect<Detail, Failure.Any | SendFailed, Queues | Workflows | WorkflowRecords>
  readonly replayMatching: (scope: Scope, filters: Filters, operationId?: string) => Effect.Effect<{ readonly operation_id: string; readonly count: number; readonly waves: number }, Failure.Any | SendFailed, Queues | Workflows | WorkflowRecords>
  /** Marks the record `skipped` (or `escalated`) if it is open; returns it. */
  readonly resolve: (scope: Scope, id: string, action: "skipped" | "escalated", note: string) => Effect.Effect<Detail, Failure.Any>
  /** Opens a skipped record again (its skip could not be completed), noting why in its history. */
  readonly reopen: (scope: Scope, id: string, note: string) => Effect.Effect<void, Failure.Any>
  /**
   * Of these (tenant, idempotency key) pairs of `queue`'s messages, the ones an operator owns: a record that is
   * open, being replayed, skipped or escalated (a `replayed` record alone does not count: its copy is back on
   * the queue). Answered as `tenantKey(tenant, key)` strings (@factline/schemas); every database is asked (the platform scope).
   */
  readonly held: (queue: string, keys: ReadonlyArray<{ readonly tenant_id: string; readonly idempotency_key: string }>) => Effect.Effect<ReadonlySet<string>, Failure.Any>
}
