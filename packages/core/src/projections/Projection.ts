/**
 * Projections: D1 read models, registered per fact type as a Drizzle table
 * plus a pure mapping from a fact to the row change it makes.
 *
 * Two kinds, both exact under duplicates, retries and reordering:
 * - **rows** — the mapping returns the columns a fact sets. Each fact type
 *   keeps its own last applied stream sequence in a `<type>_seq` column, and
 *   a fact only overwrites what a later fact of its type has not already set.
 *   Applying a fact twice, or a stream's facts in any order, gives the same row.
 * - **additive** — the mapping returns increments (sums, counts). Applied
 *   fact ids are recorded in `projection_applied` in the same D1 transaction
 *   and an increment only happens if its fact id was not applied yet.
 *
 * Every projection table has a `tenant_id` column and its key starts with it;
 * queries are always scoped by it. This module defines projections and turns
 * facts into SQL; executing it is the ProjectionStore's job.
 */
import { getTableConfig, integer, type SQLiteTable } from "drizzle-orm/sqlite-core"
import type { Fact } from "@factline/schemas"

export type Value = string | number | boolean | null
export type Row = Readonly<Record<string, Value>>

/** A statement with bound parameters only. */
export interface Sql {
  readonly sql: string
  readonly params: ReadonlyArray<Value>
}

interface Common {
  readonly name: string
  readonly table: SQLiteTable
  /** Key columns after `tenant_id` (SQL names): one row per key per tenant. */
  readonly key: ReadonlyArray<string>
  /** Columns the HTTP query API may filter on. */
  readonly queryable: ReadonlyArray<string>
}

export interface RowsProjection extends Common {
  readonly kind: "rows"
  readonly on: Readonly<Record<string, (fact: Fact) => Row | undefined>>
}

export interface AdditiveChange {
  /** The key columns of the row to change (`tenant_id` is added). */
  readonly key: Row
  /** Column → amount to add (negative to subtract). */
  readonly add: Readonly<Record<string, number>>
}

export interface AdditiveProjection extends Common {
  readonly kind: "additive"
  readonly on: Readonly<Record<string, (fact: Fact) => AdditiveChange | undefined>>
}

export type Projection = RowsProjection | AdditiveProjection

export class ProjectionConfigError extends Error {
  override readonly name = "ProjectionConfigError"
}

/** The `<type>_seq` columns a rows projection needs, to spread into its `sqliteTable` definition. */
export const sequenceColumns = <const T extends ReadonlyArray<string>>(factTypes: T) =>
  Object.fromEntries(factTypes.map((t) => [`${t}_seq`, integer(`${t}_seq`)])) as { [K in T[number] as `${K}_seq`]: ReturnType<typeof integer> }

export const tableName = (p: Projection): string => getTableConfig(p.table).name
export const columnNames = (p: Projection): ReadonlyArray<string> => getTableConfig(p.table).columns.map((c) => c.name)
/** The columns shown to readers: everything but the bookkeeping `<type>_seq` columns. */
export const visibleColumns = (p: Projection): ReadonlyArray<string> =>
  p.kind === "rows" ? columnNames(p).filter((c) => !Object.keys(p.on).some((t) => c === `${t}_seq`)) : columnNames(p)
/** Columns Drizzle declares `{ mode: "boolean" }`: stored 0/1, read back as booleans. */
export const booleanColumns = (p: Projection): ReadonlyArray<string> =>
  getTableConfig(p.table).columns.filter((c) => c.columnType === "SQLiteBoolean").map((c) => c.name)
export const isIntegerColumn = (p: Projection, column: string): boolean =>
  getTableConfig(p.table).columns.find((c) => c.name === column)?.getSQLType() === "integer"

const check = (p: Projection) => {
  if (!/^[a-z][a-z0-9_]*$/.test(p.name)) throw new ProjectionConfigError(`projection name "${p.name}" must be a lower-case word`)
  const columns = new Set(columnNames(p))
  const missing = (names: ReadonlyArray<string>, what: string) => {
    const absent = names.filter((n) => !columns.has(n))
    if (absent.length > 0) throw new ProjectionConfigError(`projection ${p.name}: ${what} ${absent.join(", ")} not in table ${tableName(p)}`)
  }
  missing(["tenant_id"], "column")
  missing(p.key, "key column(s)")
  missing(p.queryable, "queryable column(s)")
  if (p.kind === "rows") missing(Object.keys(p.on).map((t) => `${t}_seq`), "sequence column(s) (use Projection.sequenceColumns)")
  return p
}

export const rows = (definition: Omit<RowsProjection, "kind">): RowsProjection => check({ kind: "rows", ...definition }) as RowsProjection
export const additive = (definition: Omit<AdditiveProjection, "kind">): AdditiveProjection =>
  check({ kind: "additive", ...definition }) as AdditiveProjection

const q = (identifier: string) => `"${identifier.replace(/"/g, '""')}"`

/** Where a projection writes: its live table, or a rebuild's shadow. */
export interface Target {
  readonly table: string
  readonly appliedAs: string
}

export const liveTarget = (p: Projection): Target => ({ table: tableName(p), appliedAs: p.name })
export const shadowTarget = (p: Projection, shadowTable: string): Target => ({ table: shadowTable, appliedAs: `${p.name}__rebuild` })

const bindable = (value: Value): Value => (typeof value === "boolean" ? (value ? 1 : 0) : value)

/**
 * The statements that apply one fact to one projection (none if the
 * projection ignores this fact type). Throws if the mapping produces columns
 * the table does not have — a bug in the mapping, so permanent.
 */
export const statementsFor = (p: Projection, fact: Fact, target: Target = liveTarget(p)): ReadonlyArray<Sql> => {
  const map = p.on[fact.type]
  if (!map) return []
  const columns = new Set(columnNames(p))
  const table = q(target.table)
  const key = ["tenant_id", ...p.key]
  const unknown = (names: ReadonlyArray<string>) => {
    const bad = names.filter((n) => !columns.has(n) || n === "tenant_id")
    if (bad.length > 0) throw new ProjectionConfigError(`projection ${p.name} mapped ${fact.type} to unknown column(s) ${bad.join(", ")}`)
  }
  if (p.kind === "rows") {
    const row = (map as RowsProjection["on"][string])(fact)
    if (!row) return []
    unknown(Object.keys(row))
    const absentKey = p.key.filter((k) => !(k in row))
    if (absentKey.length > 0) throw new ProjectionConfigError(`projection ${p.name} mapped ${fact.type} without key column(s) ${absentKey.join(", ")}`)
    const seq = `${fact.type}_seq`
    const names = ["tenant_id", ...Object.keys(row), seq]
    const values = [fact.tenant_id, ...Object.values(row).map(bindable), fact.sequence]
    const guard = `excluded.${q(seq)} > COALESCE(${table}.${q(seq)}, 0)`
    const updates = Object.keys(row)
      .filter((c) => !key.includes(c))
      .map((c) => `${q(c)} = CASE WHEN ${guard} THEN excluded.${q(c)} ELSE ${table}.${q(c)} END`)
    updates.push(`${q(seq)} = MAX(COALESCE(${table}.${q(seq)}, 0), excluded.${q(seq)})`)
    return [{
      sql: `INSERT INTO ${table} (${names.map(q).join(", ")}) VALUES (${names.map(() => "?").join(", ")})
            ON CONFLICT (${key.map(q).join(", ")}) DO UPDATE SET ${updates.join(", ")}`,
      params: values
    }]
  }
  const change = (map as AdditiveProjection["on"][string])(fact)
  if (!change) return []
  unknown([...Object.keys(change.key), ...Object.keys(change.add)])
  const missingKey = p.key.filter((k) => !(k in change.key))
  if (missingKey.length > 0) throw new ProjectionConfigError(`projection ${p.name} mapped ${fact.type} without key column(s) ${missingKey.join(", ")}`)
  const names = ["tenant_id", ...p.key, ...Object.keys(change.add)]
  const values = [fact.tenant_id, ...p.key.map((k) => bindable(change.key[k]!)), ...Object.values(change.add)]
  return [
    {
      sql: `INSERT INTO ${table} (${names.map(q).join(", ")})
            SELECT ${names.map(() => "?").join(", ")}
            WHERE NOT EXISTS (SELECT 1 FROM projection_applied WHERE projection = ? AND fact_id = ?)
            ON CONFLICT (${key.map(q).join(", ")}) DO UPDATE SET ${Object.keys(change.add).map((c) => `${q(c)} = ${table}.${q(c)} + excluded.${q(c)}`).join(", ")}`,
      params: [...values, target.appliedAs, fact.fact_id]
    },
    {
      sql: `INSERT INTO projection_applied (projection, fact_id) VALUES (?, ?) ON CONFLICT DO NOTHING`,
      params: [target.appliedAs, fact.fact_id]
    }
  ]
}

/** The built-in `facts` projection: every fact copied to D1, idempotent by fact id. */
export const factsStatements = (facts: ReadonlyArray<Fact>): ReadonlyArray<Sql> => {
  const perRow = 10
  const rowsPerStatement = Math.floor(100 / perRow)
  const out: Array<Sql> = []
  for (let i = 0; i < facts.length; i += rowsPerStatement) {
    const chunk = facts.slice(i, i + rowsPerStatement)
    out.push({
      sql: `INSERT INTO facts (tenant_id, fact_id, stream, sequence, type, body, causation_id, correlation_id, caused_by, created_at)
            VALUES ${chunk.map(() => `(${new Array(perRow).fill("?").join(", ")})`).join(", ")}
            ON CONFLICT (tenant_id, fact_id) DO NOTHING`,
      params: chunk.flatMap((f) => [f.tenant_id, f.fact_id, f.stream, f.sequence, f.type, JSON.stringify(f.data), f.causation_id, f.correlation_id, f.caused_by, f.created_at])
    })
  }
  return out
}
