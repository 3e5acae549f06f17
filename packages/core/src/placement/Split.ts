/**
 * Splitting a tenant's projection into parts (Parts.ts) under live traffic: a move (Move.ts) whose record names the
 * parts (`tenant_moves.parts`), run by the same resumable steps of the batch queue with the same phases and the same
 * hold — the projection's writes only (its facts wait; the tenant's events and other projections go on):
 *
 * 1. **frozen** — as any move (Move.step): wait until every isolate sees the hold, and a write that passed it landed.
 * 2. **copying** — the tenant's rows of the projection already in a part's database other than the source (an earlier
 *    failed split's) are deleted; then the source's rows are read a page at a time in primary-key order and each row
 *    written to the database of its part (`INSERT OR REPLACE`: a page copied twice is the same rows) — a row whose part
 *    is on the source stays where it is — and the applied set (additive projections) to every part's database: which
 *    fact counted in which row is not recorded, and an id in every part only means no part counts it again.
 * 3. **verify** — row by row, a page of the source at a time (over as many steps as it takes, its place in the
 *    progress): each other database holds, in that page's key range, exactly the source's rows of its parts (the
 *    applied set: all of them), column for column. Different → copy again from the start, up to `Move.rounds` times;
 *    then the split fails.
 * 4. **switched** — one platform transaction records the parts (`projection_placements.parts`) and lifts the hold.
 * 5. **dropped** — after every isolate's cache of the old placement expired, the source's rows of parts elsewhere go
 *    (all of them and the applied set when no part stays on the source: Move.dropSource).
 *
 * A failed split lifts the hold where the projection was (Move.fail); its parts' partial copies are deleted by the
 * next split. It does not move a projection already in parts, nor merge parts back.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { BatchPayload } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import * as Sql from "../platform/Sql.js"
import * as Time from "../platform/Time.js"
import { Registry } from "../registry/Registry.js"
import * as Projection from "../definitions/Projection.js"
import * as Move from "./Move.js"
import * as Parts from "./Parts.js"
import { TenantPlacement } from "./Placement.js"

const unavailable = Failure.unavailable("the platform database")

/** A part's database other than the source, and the parts it holds. */
interface Target {
  readonly database: number
  readonly sql: Sql.Sql
  readonly share: Parts.Share
}

/** Where a verify or a drop of a split stands: the table it walks and the last key it passed. */
interface Walk {
  readonly table: string
  readonly after: ReadonlyArray<unknown> | null
  readonly rows: number
}

/** What a split's step works with, besides the move's. */
interface Split {
  readonly s: Move.Step
  readonly p: Projection.Projection
  readonly parts: ReadonlyArray<number>
  /** The parts' databases but the source. */
  readonly targets: ReadonlyArray<Target>
  readonly tables: Move.Tables
  /** The verify's (or the drop's) place, kept in the progress beside the copy's cursors. */
  readonly walk: Walk | undefined
}

/** Whether `row` of `table` belongs in `database`: a projection row in its part's; an applied-set row everywhere. */
const belongs = ({ p, parts }: Split, table: string, row: Readonly<Record<string, unknown>>, database: number) =>
  table !== Projection.tableName(p) || parts[Parts.partOfRow(p, row, parts.length)] === database

/** copying, before the copy: the tenant's rows of the projection left in a part's database by an earlier split that failed. */
const clearTargets = ({ s, targets, tables }: Split) =>
  Effect.gen(function*() {
    let budget = Move.rowsPerStep
    for (const target of targets) {
      for (const table of tables.tables) {
        const m = yield* tables.meta(table)
        for (let deleted = Move.rowsPerPage; deleted === Move.rowsPerPage && budget > 0; budget -= deleted) {
          deleted = yield* Move.deletePage(target.sql, table, m, s.move.tenant_id, Move.rowsPerPage)
        }
        if (budget <= 0) return s.next()
      }
    }
    yield* Move.record(s, { progress: { ...s.progress, cleared: true } })
    return s.next()
  })

/** copying: up to `Move.rowsPerStep` rows, each page's rows written to their parts' databases (the applied set to every one). */
const copyPages = (split: Split) =>
  Effect.gen(function*() {
    const { s, targets, tables } = split
    let budget = Move.rowsPerStep
    const copied: Record<string, Move.TableProgress> = { ...s.progress.tables }
    for (const table of tables.tables) {
      const m = yield* tables.meta(table)
      let state = copied[table] ?? { rows: 0, after: null, done: false }
      while (!state.done && budget > 0) {
        const rows = yield* Move.page(s.source, table, m, s.move.tenant_id, state.after, Move.rowsPerPage)
        for (const target of targets) {
          const mine = rows.filter((row) => belongs(split, table, row, target.database))
          if (mine.length > 0) yield* target.sql.batch(Move.inserts(table, m, mine))
        }
        const last = rows.at(-1)
        state = { rows: state.rows + rows.length, after: last ? m.key.map((k) => last[k]) : state.after, done: rows.length < Move.rowsPerPage }
        copied[table] = state
        budget -= rows.length
      }
      if (!state.done) break
    }
    yield* Move.record(s, { progress: { ...s.progress, tables: copied } })
    return copied
  })

/** The tenant's rows of `table` in `sql` with keys after `after` (exclusive) up to `upTo` (inclusive); open ends when null. */
const range = (sql: Sql.Sql, table: string, meta: Move.Meta, tenantId: string, after: ReadonlyArray<unknown> | null, upTo: ReadonlyArray<unknown> | null) => {
  const key = meta.key.map(Move.q).join(", ")
  const tuple = `(${meta.key.map(() => "?").join(", ")})`
  const where = Move.whereOf(meta, tenantId)
  return sql.all(Schema.Record(Schema.String, Schema.Unknown), Sql.statement(
    `SELECT ${meta.columns.map(Move.q).join(", ")} FROM ${Move.q(table)} WHERE ${where.sql}${after === null ? "" : ` AND (${key}) > ${tuple}`}${upTo === null ? "" : ` AND (${key}) <= ${tuple}`} ORDER BY ${key}`,
    ...where.params, ...(after ?? []), ...(upTo ?? [])
  ))
}

const asText = (rows: ReadonlyArray<Readonly<Record<string, unknown>>>, columns: ReadonlyArray<string>) => JSON.stringify(rows.map((r) => columns.map((c) => r[c] ?? null)))

/** Records where the walk stands (the copy's progress kept). */
const recordWalk = (s: Move.Step, walk: Walk | undefined, fields: { phase?: Move.Phase; verified?: string; finished?: boolean } = {}) =>
  Move.record(s, { ...fields, progress: { ...s.progress, walk } as Move.Progress })

/**
 * verify: up to `Move.rowsPerStep` of the source's rows, a page at a time: each other part database's rows in the
 * page's key range must be exactly the source's rows that belong there. A difference starts the copy again (up to
 * `Move.rounds`); the whole walk equal, the switch.
 */
const verifyAndSwitch = (split: Split) =>
  Effect.gen(function*() {
    const { s, parts, targets, tables } = split
    const { move, progress } = s
    let walk = split.walk ?? { table: tables.tables[0]!, after: null, rows: 0 }
    // A round's verify starts afresh (an earlier round's differences are not this one's).
    const verified: Record<string, { rows: number; equal: boolean }> = split.walk !== undefined && move.verified ? JSON.parse(move.verified) : {}
    for (let budget = Move.rowsPerStep; budget > 0;) {
      const m = yield* tables.meta(walk.table)
      const rows = yield* Move.page(s.source, walk.table, m, move.tenant_id, walk.after, Move.rowsPerPage)
      const last = rows.length === Move.rowsPerPage ? m.key.map((k) => rows.at(-1)![k]) : null
      let equal = true
      for (const target of targets) {
        const there = yield* range(target.sql, walk.table, m, move.tenant_id, walk.after, last)
        if (asText(there, m.columns) !== asText(rows.filter((row) => belongs(split, walk.table, row, target.database)), m.columns)) equal = false
      }
      verified[walk.table] = { rows: walk.rows + rows.length, equal: equal && (verified[walk.table]?.equal ?? true) }
      if (!equal) {
        if (progress.round >= Move.rounds) return yield* Move.permanent(`after ${Move.rounds} copies the source and the parts still differ (${walk.table}): a writer ignores the hold`)
        yield* Effect.logWarning(`split ${move.id} of ${move.projection} of ${move.tenant_id}: ${walk.table} changed during the copy; copying again`)
        yield* Move.record(s, { progress: { round: progress.round + 1, cleared: false, tables: {} }, verified: JSON.stringify(verified) })
        return s.next()
      }
      budget -= rows.length
      const following = tables.tables[tables.tables.indexOf(walk.table) + 1]
      if (last !== null) walk = { table: walk.table, after: last, rows: walk.rows + rows.length }
      else if (following !== undefined) walk = { table: following, after: null, rows: 0 }
      else return yield* switchParts(s, parts, verified)
    }
    yield* Move.record(s, { progress: { ...progress, walk } as Move.Progress, verified: JSON.stringify(verified) })
    return s.next()
  })

/** The switch: the projection's parts recorded and its hold ended in one platform transaction. */
const switchParts = (s: Move.Step, parts: ReadonlyArray<number>, verified: Readonly<Record<string, unknown>>) =>
  Effect.gen(function*() {
    const switchedAt = new Date(s.now).toISOString()
    yield* Effect.mapError(s.platform.batch([
      Sql.statement(
        "UPDATE projection_placements SET database = ?3, parts = ?4, frozen_since = NULL, placed_at = ?5 WHERE tenant_id = ?1 AND projection = ?2",
        s.move.tenant_id, s.move.projection, parts[0]!, JSON.stringify(parts), switchedAt
      ),
      Sql.statement(
        "UPDATE tenant_moves SET phase = 'switched', verified = ?2, copied = ?4, updated_at = ?3 WHERE id = ?1 AND phase = 'copying'",
        s.move.id, JSON.stringify(verified), switchedAt, JSON.stringify({ ...s.progress, walk: undefined })
      )
    ]), unavailable)
    s.shape.forget([s.move.tenant_id])
    return s.next(s.shape.cacheMs + Move.settleMs)
  })

/**
 * switched, when a part stays on the source: once no isolate trusts the old placement, the source's rows of parts
 * elsewhere go, a page at a time (by key); its applied set stays (it is that part's).
 */
const dropMoved = (split: Split) =>
  Effect.gen(function*() {
    const { s, p, tables } = split
    const wait = Date.parse(s.move.updated_at) + s.shape.cacheMs + Move.settleMs - s.now
    if (wait > 0 && split.walk === undefined) return s.next(wait)
    const table = Projection.tableName(p)
    const m = yield* tables.meta(table)
    let walk = split.walk ?? { table, after: null, rows: 0 }
    for (let budget = Move.rowsPerStep; budget > 0;) {
      const rows = yield* Move.page(s.source, table, m, s.move.tenant_id, walk.after, Move.rowsPerPage)
      const gone = rows.filter((row) => !belongs(split, table, row, s.move.from_database))
      if (gone.length > 0) {
        yield* s.source.run(Sql.statement(
          `DELETE FROM ${Move.q(table)} WHERE tenant_id = ? AND (${m.key.map(Move.q).join(", ")}) IN (SELECT ${m.key.map((_, i) => `json_extract(value, '$[${i}]')`).join(", ")} FROM json_each(?))`,
          s.move.tenant_id, JSON.stringify(gone.map((row) => m.key.map((k) => row[k])))
        ))
      }
      budget -= rows.length
      walk = { table, after: rows.length > 0 ? m.key.map((k) => rows.at(-1)![k]) : walk.after, rows: walk.rows + gone.length }
      if (rows.length < Move.rowsPerPage) {
        yield* recordWalk(s, walk, { phase: "dropped", finished: true })
        return undefined
      }
    }
    yield* recordWalk(s, walk)
    return s.next()
  })

/** One step of a move (`operation: "move"` of the batch queue): a split's when the move names parts, else Move.step. */
export const step = Effect.fn("Split.step")(function*(payload: BatchPayload) {
  const move = yield* Move.find(payload.batch_id)
  if (!move || move.parts === null || move.parts === undefined || move.projection === null || !["copying", "switched"].includes(move.phase)) return yield* Move.step(payload)
  const shape = yield* TenantPlacement
  const platform = yield* Sql.PlatformDatabase
  const p = (yield* Registry).projection(move.projection)
  if (!p) return yield* Move.permanent(`projection ${move.projection} is no longer registered`)
  const parts = JSON.parse(move.parts) as ReadonlyArray<number>
  const source = shape.databases[move.from_database]
  const unbound = [move.from_database, ...parts].find((d) => shape.databases[d] === undefined)
  if (!source || unbound !== undefined) return yield* Move.permanent(`read database ${unbound ?? move.from_database} is not bound`)
  const targets = [...Parts.shares(parts)].filter(([database]) => database !== move.from_database)
    .map(([database, share]): Target => ({ database, sql: shape.databases[database]!, share }))
  const now = yield* Time.millis
  const next = (delayMs = 0): Move.Next => ({ payload: { ...payload, offset: payload.offset + 1 }, delaySeconds: Math.max(0, Math.ceil(delayMs / 1000)) })
  const s: Move.Step = { move, shape, platform, source, target: targets[0]!.sql, progress: Move.progressOf(move), now, next }
  const taken = yield* Move.takenBy(move)
  // Every part's database must have the source's columns (Move.metasOf checks one target at a time).
  const metas = yield* Move.metasOf(source, targets[0]!.sql, taken.tables)
  for (const target of targets.slice(1)) yield* Move.metasOf(source, target.sql, taken.tables)
  const tables: Move.Tables = { tables: [...metas.keys()], meta: (table) => Effect.succeed({ ...metas.get(table)!, filter: taken.filters[table] }) }
  const walk = (JSON.parse(move.copied) as { walk?: Walk }).walk
  const split: Split = { s, p, parts, targets, tables, walk }
  if (move.phase === "switched") return yield* (parts.includes(move.from_database) ? dropMoved(split) : Move.dropSource(s, tables))
  if (!s.progress.cleared) return yield* clearTargets(split)
  // The copy, then (in the same step when it ends) the verify, which keeps its own place.
  if (tables.tables.some((table) => !s.progress.tables[table]?.done)) {
    const copied = yield* copyPages(split)
    if (tables.tables.some((table) => !copied[table]?.done)) return next()
    return yield* verifyAndSwitch({ ...split, s: { ...s, progress: { ...s.progress, tables: copied } } })
  }
  return yield* verifyAndSwitch(split)
})
