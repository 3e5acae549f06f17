/**
 * The dead-letter workflow over D1 `dead_messages`: list and read records
 * (tenant-scoped; the platform scope sees every tenant's), replay them to
 * their source queue with the SAME body — hence the same idempotency key
 * (a grouped purpose's record goes to its tenant's group queue of the day:
 * records name the purpose, `factline-events`, never a group queue):
 * work that succeeded meanwhile is a no-op, work that failed runs again —
 * skip them (with a `reconciliation` fact in the ledger) or escalate them.
 *
 * A replay claims the record first (`open → replaying`, one conditional
 * UPDATE), then sends, then marks it `replayed`: two replays of one record
 * send it once; a failed send puts it back to `open`; a claim left by a
 * crashed request is taken over after `staleClaimMs`. Bulk replay claims up
 * to `maxBulk` matching records and sends them in waves of 100 with
 * staggered delays (`waveDelaySeconds` apart), under one operation id.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import { tenantKey } from "@factline/schemas"
import { Queues, SendFailed, SendFailed as SendFailedOf } from "../platform/Queues.js"
import * as QueueGroups from "../consuming/QueueGroups.js"
import * as Sql from "../platform/Sql.js"
import * as Placement from "../placement/Placement.js"
import * as Failure from "../failures/Failure.js"
import * as Time from "../platform/Time.js"
import { Workflows } from "../platform/Workflows.js"
import * as WorkflowDeadLetters from "../workflows/WorkflowDeadLetters.js"
import { WorkflowRecords } from "../workflows/WorkflowRecords.js"
import { Claimable, type Detail, DetailRow, Found, Id, type Scope, type Shape, Summary, TenantKey, decodeCursor, encodeCursor, summaryColumns, where } from "./DeadLetterRecords.js"

export { type Detail, type Filters, type Scope, type Shape, type Status, Summary, statuses, validateFilters } from "./DeadLetterRecords.js"

export const maxBulk = 1_000
export const waveSize = 100
export const waveDelaySeconds = 2
export const staleClaimMs = 5 * 60_000

const unavailable = Failure.unavailable("the dead-letter store")
/** Pairs one `held` statement asks about (one JSON parameter; the text stays far under D1's statement size). */
const heldPerStatement = 200

export class DeadLetterStore extends Context.Service<DeadLetterStore, Shape>()("@factline/core/DeadLetterStore") {
  /** Each tenant's records in its read database (Placement); the platform scope reads and acts on every database. */
  static readonly layer = Layer.effect(DeadLetterStore, Effect.map(Effect.service(Placement.TenantPlacement), (placement) => placed(placement)))
}

/**
 * The workflow routed by scope: a tenant's calls run on its read database; the platform scope's list merges
 * every database's page (newest first, one keyset cursor valid on each), an action on one record runs where
 * the record is, and a bulk replay replays each database's matching records under one operation id.
 */
export const placed = (placement: Placement.Shape): Shape => {
  const on = Placement.perDatabase(make)
  const tenant = (scope: Scope) => scope.tenantId === null ? undefined : Effect.map(Placement.door(placement, scope.tenantId, false), on)
  /** The store of the database holding record `id` (the platform scope), or NotFound. */
  const holding = (id: string) =>
    Effect.gen(function*() {
      for (const sql of placement.everywhere) {
        const row = yield* Effect.mapError(sql.first(Found, Sql.statement("SELECT 1 AS found FROM dead_messages WHERE id = ?", id)), unavailable)
        if (row !== undefined) return on(sql)
      }
      return yield* new Failure.NotFound({ message: `no dead letter ${JSON.stringify(id.slice(0, 100))}` })
    })
  const byRecord = (scope: Scope, id: string) => tenant(scope) ?? holding(id)
  return {
    get: (scope, id) => Effect.flatMap(byRecord(scope, id), (store) => store.get(scope, id)),
    replay: (scope, id) => Effect.flatMap(byRecord(scope, id), (store) => store.replay(scope, id)),
    resolve: (scope, id, action, note) => Effect.flatMap(byRecord(scope, id), (store) => store.resolve(scope, id, action, note)),
    reopen: (scope, id, note) => Effect.flatMap(byRecord(scope, id), (store) => store.reopen(scope, id, note)),
    held: (queue, keys) =>
      Effect.map(Effect.forEach(placement.everywhere, (sql) => on(sql).held(queue, keys)), (sets) => new Set(sets.flatMap((set) => [...set]))),
    list: (scope, filters, page) => {
      const one = tenant(scope)
      if (one !== undefined) return Effect.flatMap(one, (store) => store.list(scope, filters, page))
      return Effect.map(Effect.forEach(placement.everywhere, (sql) => on(sql).list(scope, filters, page)), (pages) => {
        const rows = pages.flatMap((p) => p.data).sort((a, b) => a.received_at < b.received_at ? 1 : a.received_at > b.received_at ? -1 : a.id < b.id ? 1 : a.id > b.id ? -1 : 0)
        const data = rows.slice(0, page.limit)
        const last = data.at(-1)
        const more = rows.length > page.limit || pages.some((p) => p.next_cursor !== null)
        return { data, next_cursor: more && last ? encodeCursor(last.received_at, last.id) : null }
      })
    },
    replayMatching: (scope, filters) => {
      const one = tenant(scope)
      if (one !== undefined) return Effect.flatMap(one, (store) => store.replayMatching(scope, filters))
      const operationId = newOperationId()
      return Effect.map(
        Effect.forEach(placement.everywhere, (sql) => on(sql).replayMatching(scope, filters, operationId)),
        (results) => ({ operation_id: operationId, count: results.reduce((n, r) => n + r.count, 0), waves: results.reduce((n, r) => n + r.waves, 0) })
      )
    }
  }
}

const newOperationId = () => `rp_${crypto.randomUUID().replace(/-/g, "").slice(0, 20)}`

const query = <S extends Sql.Row>(sql: Sql.Sql, row: S, text: string, ...params: Array<unknown>) => Effect.mapError(sql.all(row, Sql.statement(text, ...params)), unavailable)

const historyEntry = (at: string, action: string, by: string, extra: Record<string, string> = {}) => JSON.stringify({ at, action, by, ...extra })

const getOf = (sql: Sql.Sql) =>
  Effect.fn("DeadLetterStore.get")(function*(scope: Scope, id: string) {
    const rows = yield* query(
      sql,
      DetailRow,
      `SELECT ${summaryColumns}, stack, original_message, history FROM dead_messages WHERE id = ?${scope.tenantId !== null ? " AND tenant_id = ?" : ""}`,
      id, ...(scope.tenantId !== null ? [scope.tenantId] : [])
    )
    const row = rows[0]
    if (!row) return yield* new Failure.NotFound({ message: `no dead letter ${JSON.stringify(id.slice(0, 100))}` })
    const { original_message, history, ...summary } = row
    const detail: Detail = { ...summary, original_message: JSON.parse(original_message) as unknown, history: JSON.parse(history) as Detail["history"] }
    return detail
  })

/** Claims open records (or stale claims) for a replay; returns the claimed rows. */
const claim = (sql: Sql.Sql, scope: Scope, ids: ReadonlyArray<string>, operationId: string) =>
  Effect.flatMap(Effect.all([Time.now, Time.ago(staleClaimMs)]), ([now, staleBefore]) => query(
    sql,
    Claimable,
    `UPDATE dead_messages SET status = 'replaying', resolved_by = ?, resolved_at = ?, replay_operation_id = ?
     WHERE id IN (SELECT value FROM json_each(?))${scope.tenantId !== null ? " AND tenant_id = ?" : ""}
       AND (status = 'open' OR (status = 'replaying' AND resolved_at < ?))
     RETURNING id, queue, tenant_id, original_message`,
    scope.actor, now, operationId, JSON.stringify(ids), ...(scope.tenantId !== null ? [scope.tenantId] : []),
    staleBefore
  ))

const settle = (sql: Sql.Sql, ids: ReadonlyArray<string>, status: "replayed" | "open", by: string, operationId: string) =>
  Effect.mapError(
    Effect.flatMap(Time.now, (now) => sql.run(Sql.statement(
        `UPDATE dead_messages SET status = ?, resolved_at = ?, resolved_by = CASE WHEN ? = 'open' THEN NULL ELSE resolved_by END,
           history = json_insert(history, '$[#]', json(?))
         WHERE id IN (SELECT value FROM json_each(?)) AND status = 'replaying'`
      , status, status === "open" ? null : now, status, historyEntry(now, status === "open" ? "replay_failed" : "replayed", by, { operation_id: operationId }), JSON.stringify(ids)))),
    unavailable
  )

/** Sends claimed records back to their queues in waves; settles each wave as replayed, or back to open if its send failed. */
const send = (sql: Sql.Sql, claimed: ReadonlyArray<{ id: string; queue: string; tenant_id: string | null; original_message: string }>, by: string, operationId: string) =>
  Effect.gen(function*() {
    const queues = yield* Queues
    // A record names its purpose (`factline-events`); it goes back to its tenant's group queue as the producer
    // routes it today (Queues.route). A record without a tenant (its body never decoded) goes to group 0,
    // which every deployment has.
    const destination = (c: { readonly queue: string; readonly tenant_id: string | null }) => {
      const purpose = QueueGroups.purposeOf(c.queue)
      return c.tenant_id === null ? QueueGroups.route(purpose, "", 1) : queues.route(purpose, c.tenant_id)
    }
    // A failed workflow instance's record is replayed by restarting the instance (its steps' keys keep its calls once).
    let failure: SendFailed | undefined
    const instances = claimed.filter((c) => c.queue === WorkflowDeadLetters.queue)
    if (instances.length > 0) {
      const workflows = yield* Workflows
      const records = yield* WorkflowRecords
      for (const c of instances) {
        const restarted = yield* Effect.result(WorkflowDeadLetters.restart(workflows, records, c.original_message))
        if (Result.isFailure(restarted)) {
          failure ??= new SendFailedOf({ queue: c.queue, message: restarted.failure.message, sent: 0, notSent: 1, calls: 1 })
          yield* settle(sql, [c.id], "open", by, operationId)
        } else yield* settle(sql, [c.id], "replayed", by, operationId)
      }
    }
    const byQueue = new Map<string, Array<{ id: string; body: unknown }>>()
    for (const c of claimed.filter((c) => c.queue !== WorkflowDeadLetters.queue)) {
      const name = destination(c)
      byQueue.set(name, [...(byQueue.get(name) ?? []), { id: c.id, body: JSON.parse(c.original_message) as unknown }])
    }
    let wave = 0
    for (const [name, items] of byQueue) {
      for (let i = 0; i < items.length; i += waveSize) {
        const chunkItems = items.slice(i, i + waveSize)
        const delaySeconds = wave * waveDelaySeconds
        wave++
        // The records after a failed call go back to open; those on the queue are replayed.
        const sent = yield* Effect.result(queues.send(name, chunkItems.map((x) => x.body), { delaySeconds }))
        const onQueue = Result.isFailure(sent) ? sent.failure.sent : chunkItems.length
        if (Result.isFailure(sent)) {
          failure = sent.failure
          yield* settle(sql, chunkItems.slice(onQueue).map((x) => x.id), "open", by, operationId)
        }
        const ids = chunkItems.slice(0, onQueue).map((x) => x.id)
        if (ids.length > 0) yield* settle(sql, ids, "replayed", by, operationId)
      }
    }
    return { waves: wave, failure }
  })

const heldOf = (sql: Sql.Sql): Shape["held"] =>
  Effect.fn("DeadLetterStore.held")(function*(queue, keys) {
    const found = new Set<string>()
    for (let i = 0; i < keys.length; i += heldPerStatement) {
      const pairs = keys.slice(i, i + heldPerStatement).map((k) => [k.tenant_id, k.idempotency_key])
      const rows = yield* query(
        sql,
        TenantKey,
        `SELECT DISTINCT tenant_id, idempotency_key FROM dead_messages
         WHERE queue = ? AND status <> 'replayed'
           AND (tenant_id, idempotency_key) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))`,
        queue, JSON.stringify(pairs)
      )
      for (const row of rows) found.add(tenantKey(row.tenant_id, row.idempotency_key))
    }
    return found
  })

const listOf = (sql: Sql.Sql): Shape["list"] =>
  Effect.fn("DeadLetterStore.list")(function*(scope, filters, page) {
    const w = where(scope, filters)
    const cursor = page.cursor === undefined ? undefined : decodeCursor(page.cursor)
    if (page.cursor !== undefined && cursor === undefined) {
      return yield* new Failure.InvalidInput({ code: "invalid_query", message: "malformed cursor", problems: [{ path: "cursor", message: "malformed cursor; use next_cursor from a previous page" }] })
    }
    const clauses = [w.sql, cursor ? `${w.sql ? "AND" : "WHERE"} (received_at, id) < (?, ?)` : ""].join(" ")
    const rows = yield* query(
      sql,
      Summary,
      `SELECT ${summaryColumns} FROM dead_messages ${clauses} ORDER BY received_at DESC, id DESC LIMIT ?`,
      ...w.params, ...(cursor ?? []), page.limit + 1
    )
    const data = rows.slice(0, page.limit)
    const last = data.at(-1)
    return { data, next_cursor: rows.length > page.limit && last ? encodeCursor(last.received_at, last.id) : null }
  })

const replayOf = (sql: Sql.Sql, get: ReturnType<typeof getOf>): Shape["replay"] =>
  Effect.fn("DeadLetterStore.replay")(function*(scope, id) {
    const current = yield* get(scope, id)
    const operationId = newOperationId()
    const claimed = yield* claim(sql, scope, [id], operationId)
    if (claimed.length === 0) {
      return yield* new Failure.Conflict({ message: `dead letter ${id} is ${current.status}${current.resolved_by ? ` (by ${current.resolved_by} at ${current.resolved_at})` : ""}; only an open one can be replayed` })
    }
    const { failure } = yield* send(sql, claimed, scope.actor, operationId)
    if (failure) return yield* failure
    return yield* get(scope, id)
  })

const replayMatchingOf = (sql: Sql.Sql): Shape["replayMatching"] =>
  Effect.fn("DeadLetterStore.replayMatching")(function*(scope, filters, given) {
    const w = where(scope, { ...filters, status: "open" })
    const rows = yield* query(sql, Id, `SELECT id FROM dead_messages ${w.sql} ORDER BY received_at LIMIT ?`, ...w.params, maxBulk)
    const operationId = given ?? newOperationId()
    if (rows.length === 0) return { operation_id: operationId, count: 0, waves: 0 }
    const claimed = yield* claim(sql, scope, rows.map((r) => r.id), operationId)
    const { waves, failure } = yield* send(sql, claimed, scope.actor, operationId)
    if (failure) return yield* failure
    return { operation_id: operationId, count: claimed.length, waves }
  })

const resolveOf = (sql: Sql.Sql, get: ReturnType<typeof getOf>): Shape["resolve"] =>
  Effect.fn("DeadLetterStore.resolve")(function*(scope, id, action, note) {
    const current = yield* get(scope, id)
    const now = yield* Time.now
    const changed = yield* query(
      sql,
      Id,
      `UPDATE dead_messages SET status = ?, resolved_by = ?, resolved_at = ?, history = json_insert(history, '$[#]', json(?))
       WHERE id = ? AND status = 'open'${scope.tenantId !== null ? " AND tenant_id = ?" : ""} RETURNING id`,
      action, scope.actor, now, historyEntry(now, action, scope.actor, { note }), id, ...(scope.tenantId !== null ? [scope.tenantId] : [])
    )
    if (changed.length === 0) {
      return yield* new Failure.Conflict({ message: `dead letter ${id} is ${current.status}${current.resolved_by ? ` (by ${current.resolved_by} at ${current.resolved_at})` : ""}; only an open one can be ${action}` })
    }
    return yield* get(scope, id)
  })

const reopenOf = (sql: Sql.Sql): Shape["reopen"] =>
  Effect.fn("DeadLetterStore.reopen")(function*(scope, id, note) {
    yield* Effect.flatMap(Time.now, (now) => Effect.asVoid(Effect.mapError(sql.run(Sql.statement(
      `UPDATE dead_messages SET status = 'open', resolved_by = NULL, resolved_at = NULL, history = json_insert(history, '$[#]', json(?))
       WHERE id = ? AND status = 'skipped'${scope.tenantId !== null ? " AND tenant_id = ?" : ""}`,
      historyEntry(now, "skip_failed", scope.actor, { note }), id, ...(scope.tenantId !== null ? [scope.tenantId] : [])
    )), unavailable)))
  })

/** The store over one database: each operation built from it. */
export const make = (sql: Sql.Sql): Shape => {
  const get = getOf(sql)
  return {
    get,
    held: heldOf(sql),
    list: listOf(sql),
    replay: replayOf(sql, get),
    replayMatching: replayMatchingOf(sql),
    resolve: resolveOf(sql, get),
    reopen: reopenOf(sql)
  }
}
