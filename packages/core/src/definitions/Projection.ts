/**
 * Projections: D1 read models, registered per fact type as a Drizzle table
 * plus a pure mapping from a fact to the row change it makes.
 *
 * Two kinds, both exact under duplicates, retries and reordering:
 * - **rows** — the mapping returns the columns a fact sets. Each fact type
 *   keeps its own last applied stream sequence in a `<type>_seq` column, and
 *   a fact only overwrites what a later fact of its type has not already set.
 *   Applying a fact twice, or a stream's facts in any order, gives the same row.
 *   A row's facts of different types in one batch are folded into ONE upsert
 *   (each column still guarded by its own type's sequence): D1 bills one row
 *   written per row per batch, not one per fact.
 * - **additive** — the mapping returns increments (sums, counts). Applied
 *   fact ids are recorded in `projection_applied` in the same D1 transaction
 *   and an increment only happens if its fact id was not applied yet.
 *
 * A projection maps fact definitions, never raw type strings:
 * `on: [Projection.on(Charge, (data) => ({ … }))]` gives the mapping typed
 * `data`, and a misspelled fact is a compile error.
 *
 * Every projection table has a `tenant_id` column and its key starts with it;
 * queries are always scoped by it. This module defines projections and turns
 * a batch of facts into a few set-based statements (rows as one bound JSON
 * array, read with `json_each`), as many for 10 facts as for 500; executing
 * them is the ProjectionStore's job.
 */
import { getTableConfig, integer, type SQLiteIntegerBuilderInitial, type SQLiteTable } from "drizzle-orm/sqlite-core"
import type { Fact } from "@factline/schemas"
import type * as FactDefinition from "./FactDefinition.js"
import * as Naming from "./Naming.js"
import * as Personal from "../personal/Personal.js"
import { jsonArrays } from "../platform/JsonArrays.js"

export type Value = string | number | boolean | null
export type Row = Readonly<Record<string, Value>>

/** A statement with bound parameters only. */
export interface Sql {
  readonly sql: string
  readonly params: ReadonlyArray<Value>
}

interface Common<Table extends SQLiteTable = SQLiteTable> {
  readonly name: string
  readonly table: Table
  /** Key columns after `tenant_id` (SQL names): one row per key per tenant. */
  readonly key: ReadonlyArray<ColumnOf<Table>>
  /** Columns the HTTP query API may filter on. */
  readonly queryable: ReadonlyArray<ColumnOf<Table>>
  /**
   * The mapping's version (a whole number ≥ 1, default 1). Raise it when the mapping changes what it writes
   * for facts already stored: the deployment then replays the ledger into the projection by itself (CatchUp).
   */
  readonly version?: number
  /**
   * What erasing a data subject does to this projection's rows (docs/personal-data.md). Required when it maps a
   * fact type that declares personal data (the registry refuses it otherwise): `delete` the subject's rows,
   * `mask` named columns (set to the marker `"[erased]"`), or `none` with the reason it holds no personal data.
   * `subject` is the column holding the data subject's id.
   */
  readonly erasure?: Erasure<ColumnOf<Table>>
}

/** What erasure does to a projection's rows of the erased data subject (`Common.erasure`). */
export type Erasure<Column extends string = string> =
  | { readonly subject: Column; readonly action: "delete" }
  | { readonly subject: Column; readonly action: "mask"; readonly columns: readonly [Column, ...ReadonlyArray<Column>] }
  | { readonly action: "none"; readonly reason: string }

/** How one fact type changes a projection: `Projection.on(Charge, (data, fact) => …)`. `T` is the fact type's name. */
export interface Mapping<R, T extends string = string> {
  readonly fact: FactDefinition.FactDefinition<T, any>
  readonly map: (data: any, fact: Fact) => R | undefined
}

/** A typed mapping of one fact type; return `undefined` to leave the projection unchanged for that fact. */
export const on = <T extends string, D, R extends object | undefined>(
  fact: FactDefinition.FactDefinition<T, D>,
  map: (data: D, fact: FactDefinition.StoredFact<T, D>) => R
): Mapping<Exclude<R, undefined>, T> => ({ fact, map: map as Mapping<Exclude<R, undefined>>["map"] })

/**
 * A rows projection. Its type keeps the Drizzle table and the names of the fact types it maps, so that
 * `RowOf` can say what a reader of the query API gets.
 */
export interface RowsProjection<Table extends SQLiteTable = SQLiteTable, Types extends string = string> extends Common<Table> {
  readonly kind: "rows"
  readonly on: ReadonlyArray<Mapping<Row, Types>>
  /** The mapping of each fact type, by type. */
  readonly byType: ReadonlyMap<string, (fact: Fact) => Row | undefined>
}

export interface AdditiveChange {
  /** The key columns of the row to change (`tenant_id` is added). */
  readonly key: Row
  /** Column → amount to add (negative to subtract). */
  readonly add: Readonly<Record<string, number>>
}

export interface AdditiveProjection<Table extends SQLiteTable = SQLiteTable> extends Common<Table> {
  readonly kind: "additive"
  readonly on: ReadonlyArray<Mapping<AdditiveChange>>
  readonly byType: ReadonlyMap<string, (fact: Fact) => AdditiveChange | undefined>
}

export type Projection = RowsProjection | AdditiveProjection

export class ProjectionConfigError extends Error {
  override readonly name = "ProjectionConfigError"
}

/**
 * A mapping gave an integer column (or an additive increment) a number that is
 * not a safe integer (beyond ±(2^53 − 1), or not whole): JavaScript cannot
 * carry it exactly, so writing it would store a silently rounded amount. A bug
 * in the mapping (or data past the ingest bounds), so permanent.
 */
export class UnsafeInteger extends Error {
  override readonly name = "UnsafeInteger"
}

/** The largest integer JavaScript, JSON parsers using doubles and the API carry exactly: 2^53 − 1. */
export const maxSafeInteger = Number.MAX_SAFE_INTEGER

type TypeName<F> = F extends string ? F : F extends FactDefinition.FactDefinition<infer T, any> ? T : never

/**
 * The `<type>_seq` columns a rows projection needs, to spread into its `sqliteTable` definition:
 * `...Projection.sequenceColumns([Outcome, Charge])` (fact definitions, or their type names).
 */
export const sequenceColumns = <const F extends ReadonlyArray<string | FactDefinition.Any>>(facts: F) =>
  Object.fromEntries(facts.map((f) => typeof f === "string" ? f : f.type).map((t) => [`${t}_seq`, integer(`${t}_seq`)])) as {
    [K in F[number] as `${TypeName<K>}_seq`]: SQLiteIntegerBuilderInitial<`${TypeName<K>}_seq`>
  }

/** What a projection's statements need from its Drizzle table, computed once per table. */
interface TableInfo {
  readonly name: string
  readonly columns: ReadonlyArray<string>
  readonly columnSet: ReadonlySet<string>
  readonly booleans: ReadonlyArray<string>
  readonly integers: ReadonlySet<string>
}

const tableInfos = new WeakMap<SQLiteTable, TableInfo>()
const info = (p: Projection): TableInfo => {
  const known = tableInfos.get(p.table)
  if (known) return known
  const config = getTableConfig(p.table)
  const columns = config.columns.map((c) => c.name)
  const computed: TableInfo = {
    name: config.name,
    columns,
    columnSet: new Set(columns),
    booleans: config.columns.filter((c) => c.columnType === "SQLiteBoolean").map((c) => c.name),
    integers: new Set(config.columns.filter((c) => c.getSQLType() === "integer").map((c) => c.name))
  }
  tableInfos.set(p.table, computed)
  return computed
}

export const tableName = (p: Projection): string => info(p).name
export const columnNames = (p: Projection): ReadonlyArray<string> => info(p).columns
/** The columns shown to readers: everything but the bookkeeping `<type>_seq` columns. */
export const visibleColumns = (p: Projection): ReadonlyArray<string> =>
  p.kind === "rows" ? columnNames(p).filter((c) => ![...p.byType.keys()].some((t) => c === `${t}_seq`)) : columnNames(p)
/** Columns Drizzle declares `{ mode: "boolean" }`: stored 0/1, read back as booleans. */
export const booleanColumns = (p: Projection): ReadonlyArray<string> => info(p).booleans
export const isIntegerColumn = (p: Projection, column: string): boolean => info(p).integers.has(column)

const check = (p: Projection) => {
  try {
    Naming.check("projection", p.name)
  } catch (error) {
    throw new ProjectionConfigError((error as Error).message)
  }
  const columns = new Set(columnNames(p))
  const missing = (names: ReadonlyArray<string>, what: string) => {
    const absent = names.filter((n) => !columns.has(n))
    if (absent.length > 0) throw new ProjectionConfigError(`projection ${p.name}: ${what} ${absent.join(", ")} not in table ${tableName(p)}`)
  }
  if (p.version !== undefined && (!Number.isSafeInteger(p.version) || p.version < 1)) {
    throw new ProjectionConfigError(`projection ${p.name}: version must be a whole number ≥ 1 (got ${p.version})`)
  }
  missing(["tenant_id"], "column")
  missing(p.key, "key column(s)")
  missing(p.queryable, "queryable column(s)")
  if (p.kind === "rows") missing([...p.byType.keys()].map((t) => `${t}_seq`), "sequence column(s) (use Projection.sequenceColumns)")
  return p
}

/**
 * The mappings by fact type. A projection whose erasure deletes a data subject's rows maps nothing for a fact whose
 * personal fields read as erased: a late fact of an erased subject, or a rebuild or reconcile after the erasure,
 * never brings its rows back.
 */
const byType = <R>(name: string, mappings: ReadonlyArray<Mapping<R>>, erasure?: Erasure): ReadonlyMap<string, (fact: Fact) => R | undefined> => {
  const map = new Map<string, (fact: Fact) => R | undefined>()
  for (const mapping of mappings) {
    if (map.has(mapping.fact.type)) throw new ProjectionConfigError(`projection ${name} maps fact type "${mapping.fact.type}" twice; one Projection.on per fact type`)
    const personal = erasure?.action === "delete" ? mapping.fact.personalData : undefined
    map.set(mapping.fact.type, personal === undefined
      ? (fact) => mapping.map(fact.data, fact)
      : (fact) => (personal.fields.some((f) => fact.data[f] === Personal.erased) ? undefined : mapping.map(fact.data, fact)))
  }
  return map
}

export interface Definition<R, Table extends SQLiteTable = SQLiteTable, Types extends string = string> extends Common<Table> {
  readonly on: ReadonlyArray<Mapping<R, Types>>
}

/** The SQL names of a Drizzle table's columns (`integer("mrr_cents")` → `"mrr_cents"`): what a mapping may write. */
export type ColumnOf<Table extends SQLiteTable> = { [K in keyof Table["_"]["columns"]]: Table["_"]["columns"][K]["_"]["name"] }[keyof Table["_"]["columns"]]

/** The keys of each member of a union (`keyof (A | B)` would keep only the keys they share). */
type KeysOf<R> = R extends unknown ? keyof R : never
/** The columns written that the table lacks (or `tenant_id`); none to check when the output is a wide `Row` (checked at run time). */
type Unknown<Keys, Columns> = string extends Keys ? never : Exclude<Keys, Columns | "tenant_id"> | Extract<Keys, "tenant_id">

/**
 * What the compiler shows for a mapping that writes a column its table does not have: `mrr_cent` for
 * `mrr_cents` is a compile error naming the column (`tenant_id` is the runtime's to set, never a mapping's).
 */
export interface UnknownColumns<Columns, TableColumns> {
  readonly "this mapping writes column(s) its table does not have": Columns
  readonly "the table's columns": TableColumns
}

type CheckRow<M, Columns> = M extends Mapping<infer R, string>
  ? [Unknown<KeysOf<R>, Columns>] extends [never] ? M : UnknownColumns<Unknown<KeysOf<R>, Columns>, Exclude<Columns, "tenant_id">>
  : M
type CheckAdditive<M, Columns> = M extends Mapping<infer R, string>
  ? [R] extends [AdditiveChange]
    ? [Unknown<KeysOf<R["key"]> | KeysOf<R["add"]>, Columns>] extends [never] ? M
    : UnknownColumns<Unknown<KeysOf<R["key"]> | KeysOf<R["add"]>, Columns>, Exclude<Columns, "tenant_id">>
  : M
  : M
/** Each mapping of `On` as it is, or `UnknownColumns` where it writes a column `Table` does not have. */
export type CheckedRows<Table extends SQLiteTable, On> = { readonly [I in keyof On]: CheckRow<On[I], ColumnOf<Table>> }
export type CheckedAdditive<Table extends SQLiteTable, On> = { readonly [I in keyof On]: CheckAdditive<On[I], ColumnOf<Table>> }
type TypesOf<On extends ReadonlyArray<Mapping<any, string>>> = On[number] extends Mapping<any, infer T> ? T : never

/**
 * Every mapping is typed against the table: a column it writes (a rows mapping's keys, an additive
 * mapping's `key` and `add`) that the table does not have is a compile error naming it, and so is a
 * `key` or `queryable` column the table does not have. At run time the same is checked again when a
 * fact is applied, and `RegistrySpec.check` probes each mapping with data drawn from its fact's schema.
 */
export const rows = <Table extends SQLiteTable, const On extends ReadonlyArray<Mapping<Row, string>>>(
  definition: Common<Table> & {
    readonly on: On & CheckedRows<Table, On>
  }
): RowsProjection<Table, TypesOf<On>> =>
  check({ kind: "rows", ...definition, byType: byType(definition.name, definition.on, definition.erasure) }) as RowsProjection<Table, TypesOf<On>>
export const additive = <Table extends SQLiteTable, const On extends ReadonlyArray<Mapping<AdditiveChange, string>>>(
  definition: Common<Table> & {
    readonly on: On & CheckedAdditive<Table, On>
  }
): AdditiveProjection<Table> =>
  check({ kind: "additive", ...definition, byType: byType(definition.name, definition.on, definition.erasure) }) as AdditiveProjection<Table>

/**
 * A row as the query API (`GET /v1/projections/:name`) returns it, typed from the projection's Drizzle
 * table: every column but `tenant_id` and a rows projection's `<type>_seq` bookkeeping (what
 * `visibleColumns` selects), boolean-mode columns as booleans. One caveat the type cannot carry: an integer
 * column whose value is beyond ±(2^53 − 1) arrives as its exact decimal string (see ProjectionQuery).
 */
export type RowOf<P> = P extends RowsProjection<infer Table, infer Types> ? Visible<Table["$inferSelect"], "tenant_id" | `${Types}_seq`>
  : P extends AdditiveProjection<infer Table> ? Visible<Table["$inferSelect"], "tenant_id">
  : never
type Visible<Row, Hidden> = { readonly [K in keyof Row as K extends Hidden ? never : K]: Row[K] }

/** The mapping's version: the definition's `version`, 1 when it declares none. */
export const versionOf = (p: Projection): number => p.version ?? 1

/** The fact types a projection listens to. */
export const factTypes = (p: Projection): ReadonlyArray<string> => [...p.byType.keys()]

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
 * Facts per statement: every row of a statement travels as one bound JSON
 * array read with `json_each(?)` (D1 allows only 100 bound parameters, so
 * multi-row VALUES would need a statement per few facts). A chunk also closes
 * before its JSON passes `maxJsonChars` (≤ 1.5 MB even if every character
 * took three UTF-8 bytes), under D1's 2 MB limit for one value.
 */
export const factsPerStatement = 500
const maxJsonChars = 500_000

/** Rows (arrays of values) as JSON arrays of at most `factsPerStatement` rows and about `maxJsonChars` characters. */
const jsonChunks = (rows: ReadonlyArray<ReadonlyArray<Value>>): Array<string> =>
  jsonArrays(rows.map((row) => JSON.stringify(row)), maxJsonChars, factsPerStatement)

/** `json_extract(value, '$[0]'), …` for `count` positions starting at `from`. */
const positions = (from: number, count: number): Array<string> =>
  Array.from({ length: count }, (_, i) => `json_extract(value, '$[${from + i}]')`)

/**
 * The problem with the columns a mapping of `factType` wrote, if any: one it may not write (not in the
 * table, or `tenant_id`), named beside the table's columns. Checked for every fact applied, and by
 * `RegistrySpec.check`'s probe before anything runs.
 */
export const unknownColumnsProblem = (p: Projection, factType: string, names: ReadonlyArray<string>): string | undefined => {
  const columns = info(p).columnSet
  const bad = names.filter((n) => !columns.has(n) || n === "tenant_id")
  if (bad.length === 0) return undefined
  const writable = visibleColumns(p).filter((c) => c !== "tenant_id")
  return `projection ${p.name} mapped ${factType} to unknown column(s) ${bad.join(", ")}; table ${tableName(p)} has ${writable.join(", ")}`
}

/** The columns a mapping's output writes: a rows mapping's keys, an additive mapping's `key` and `add`. */
export const writtenColumns = (p: Projection, output: Row | AdditiveChange): ReadonlyArray<string> =>
  p.kind === "rows" ? Object.keys(output) : [...Object.keys((output as AdditiveChange).key ?? {}), ...Object.keys((output as AdditiveChange).add ?? {})]

const unknownColumns = (p: Projection, fact: Fact, names: ReadonlyArray<string>) => {
  const problem = unknownColumnsProblem(p, fact.type, names)
  if (problem !== undefined) throw new ProjectionConfigError(problem)
}

/** Numbers bound for integer columns must be safe integers; an increment must be a finite number whatever its column. */
const unsafeNumbers = (p: Projection, fact: Fact, values: Readonly<Record<string, Value>>, what: "value" | "increment") => {
  const integers = info(p).integers
  for (const [column, value] of Object.entries(values)) {
    if (typeof value !== "number") continue
    if (integers.has(column) ? !Number.isSafeInteger(value) : what === "increment" && !Number.isFinite(value)) {
      throw new UnsafeInteger(
        `projection ${p.name} mapped ${fact.type} fact ${fact.fact_id} to the ${what} ${value} for ${column}, which is not a safe integer ` +
          `(a whole number within ±${maxSafeInteger}): it would be stored rounded`
      )
    }
  }
}

const missingKey = (p: Projection, fact: Fact, present: object) => {
  const absent = p.key.filter((k) => !(k in present))
  if (absent.length > 0) throw new ProjectionConfigError(`projection ${p.name} mapped ${fact.type} without key column(s) ${absent.join(", ")}`)
}

/** Facts mapped to rows, grouped by what they set: one statement shape per group. */
interface Group {
  readonly columns: ReadonlyArray<string>
  readonly rows: Array<ReadonlyArray<Value>>
}

const groupBy = (groups: Map<string, Group & { readonly type: string }>, type: string, columns: ReadonlyArray<string>, row: ReadonlyArray<Value>) => {
  const signature = `${type}\u0000${columns.join("\u0000")}`
  const group = groups.get(signature) ?? { type, columns, rows: [] }
  groups.set(signature, group)
  group.rows.push(row)
}

/** One fact's row change for a rows projection: its type, the non-key columns it sets and their values. */
interface RowChange {
  readonly type: string
  readonly sequence: number
  readonly columns: ReadonlyArray<string>
  readonly values: ReadonlyArray<Value>
}

/**
 * The changes of one row (tenant and key) in one batch, to write as ONE upsert: one row written per key
 * per batch instead of one per fact. Only when every fact type appears once and the types set disjoint
 * columns — then each column is guarded by its own type's sequence exactly as if the facts were applied
 * one by one, in any order. Otherwise (two facts of a type, or two types setting one column) each fact
 * keeps its own upsert, in arrival order, as before.
 */
const mergeable = (changes: ReadonlyArray<RowChange>): boolean => {
  const types = new Set<string>()
  const columns = new Set<string>()
  for (const change of changes) {
    if (types.has(change.type)) return false
    types.add(change.type)
    for (const c of change.columns) {
      if (columns.has(c)) return false
      columns.add(c)
    }
  }
  return true
}

const rowsStatements = (p: RowsProjection, facts: ReadonlyArray<Fact>, target: Target): Array<Sql> => {
  const key = ["tenant_id", ...p.key]
  const byKey = new Map<string, { readonly key: ReadonlyArray<Value>; readonly changes: Array<RowChange> }>()
  for (const fact of facts) {
    const row = p.byType.get(fact.type)?.(fact)
    if (!row) continue
    const all = Object.keys(row).sort()
    unknownColumns(p, fact, all)
    missingKey(p, fact, row)
    unsafeNumbers(p, fact, row, "value")
    const keyValues = [fact.tenant_id, ...p.key.map((k) => bindable(row[k]!))]
    const columns = all.filter((c) => !key.includes(c))
    const signature = JSON.stringify(keyValues)
    const entry = byKey.get(signature) ?? { key: keyValues, changes: [] }
    byKey.set(signature, entry)
    entry.changes.push({ type: fact.type, sequence: fact.sequence, columns, values: columns.map((c) => bindable(row[c]!)) })
  }
  // Rows grouped by statement shape: the fact types (with their columns) a row carries.
  const groups = new Map<string, { readonly changes: ReadonlyArray<Omit<RowChange, "values" | "sequence">>; readonly rows: Array<ReadonlyArray<Value>> }>()
  const add = (changes: ReadonlyArray<RowChange>, keyValues: ReadonlyArray<Value>) => {
    const ordered = [...changes].sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0))
    const shape = JSON.stringify(ordered.map((c) => [c.type, c.columns]))
    const group = groups.get(shape) ?? { changes: ordered.map(({ type, columns }) => ({ type, columns })), rows: [] }
    groups.set(shape, group)
    group.rows.push([...keyValues, ...ordered.flatMap((c) => [...c.values, c.sequence])])
  }
  for (const { key: keyValues, changes } of byKey.values()) {
    if (mergeable(changes)) add(changes, keyValues)
    else for (const change of changes) add([change], keyValues)
  }
  const table = q(target.table)
  return [...groups.values()].flatMap(({ changes, rows }) => {
    const names = [...key, ...changes.flatMap((c) => [...c.columns, `${c.type}_seq`])]
    const updates = changes.flatMap(({ type, columns }) => {
      const seq = q(`${type}_seq`)
      // Same guard as applying the facts one by one: SQLite upserts the selected rows in turn.
      const guard = `excluded.${seq} > COALESCE(${table}.${seq}, 0)`
      return [
        ...columns.map((c) => `${q(c)} = CASE WHEN ${guard} THEN excluded.${q(c)} ELSE ${table}.${q(c)} END`),
        `${seq} = MAX(COALESCE(${table}.${seq}, 0), excluded.${seq})`
      ]
    })
    // `WHERE true` keeps SQLite from reading ON CONFLICT as a join constraint.
    const sql = `INSERT INTO ${table} (${names.map(q).join(", ")})
            SELECT ${positions(0, names.length).join(", ")} FROM json_each(?) WHERE true
            ON CONFLICT (${key.map(q).join(", ")}) DO UPDATE SET ${updates.join(", ")}`
    return jsonChunks(rows).map((json) => ({ sql, params: [json] }))
  })
}

const additiveStatements = (p: AdditiveProjection, facts: ReadonlyArray<Fact>, target: Target): Array<Sql> => {
  const groups = new Map<string, Group & { readonly type: string }>()
  const applied = new Map<string, string>()
  for (const fact of facts) {
    if (applied.has(fact.fact_id)) continue
    const change = p.byType.get(fact.type)?.(fact)
    if (!change) continue
    const adds = Object.keys(change.add).sort()
    unknownColumns(p, fact, [...Object.keys(change.key), ...adds])
    missingKey(p, fact, change.key)
    unsafeNumbers(p, fact, change.key, "value")
    unsafeNumbers(p, fact, change.add, "increment")
    applied.set(fact.fact_id, fact.tenant_id)
    groupBy(groups, "", adds, [fact.fact_id, fact.tenant_id, ...p.key.map((k) => bindable(change.key[k]!)), ...adds.map((c) => change.add[c]!)])
  }
  if (applied.size === 0) return []
  const table = q(target.table)
  const key = ["tenant_id", ...p.key]
  const keyPositions = positions(1, key.length)
  const increments = [...groups.values()].flatMap(({ columns, rows }) => {
    // Per key, the sum over the facts not applied yet; row = [fact_id, tenant_id, ...key, ...increments].
    const sql = `INSERT INTO ${table} (${[...key, ...columns].map(q).join(", ")})
            SELECT ${[...keyPositions, ...positions(1 + key.length, columns.length).map((v) => `SUM(${v})`)].join(", ")}
            FROM json_each(?)
            WHERE NOT EXISTS (SELECT 1 FROM projection_applied WHERE projection = ? AND fact_id = json_extract(value, '$[0]'))
            GROUP BY ${keyPositions.join(", ")}
            ON CONFLICT (${key.map(q).join(", ")}) DO UPDATE SET ${columns.map((c) => `${q(c)} = ${table}.${q(c)} + excluded.${q(c)}`).join(", ")}`
    return jsonChunks(rows).map((json) => ({ sql, params: [json, target.appliedAs] }))
  })
  // After every increment, in the same transaction: the increments above saw none of these ids.
  const record = jsonChunks([...applied].map(([id, tenant]) => [id, tenant])).map((json): Sql => ({
    sql: `INSERT INTO projection_applied (projection, fact_id, tenant_id)
          SELECT ?, json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?) WHERE true ON CONFLICT DO NOTHING`,
    params: [target.appliedAs, json]
  }))
  return [...increments, ...record]
}

/**
 * The statements that apply a batch of facts to one projection, to run in
 * ONE transaction: one per combination of fact types (and their columns) a
 * row gets in the batch for a rows projection, one per set of increment columns plus one for the applied set
 * for an additive one — their number does not grow with the batch (up to
 * `factsPerStatement` facts). Applying a batch twice, or its facts in any
 * order or in several batches, gives the same rows; a fact twice in one
 * batch counts once. Throws if a mapping throws or produces columns the table
 * does not have — a bug, so permanent; `batchStatements(p, [fact])` finds
 * which fact it was.
 */
export const batchStatements = (p: Projection, facts: ReadonlyArray<Fact>, target: Target = liveTarget(p)): ReadonlyArray<Sql> =>
  p.kind === "rows" ? rowsStatements(p, facts, target) : additiveStatements(p, facts, target)

/**
 * The built-in `facts` projection: every fact copied to D1, idempotent by
 * fact id (its `created_at` is fixed in the ledger, so the key
 * `(tenant_id, created_at, fact_id)` identifies a fact as well).
 */
export const factsStatements = (facts: ReadonlyArray<Fact>): ReadonlyArray<Sql> => {
  const columns = ["tenant_id", "fact_id", "stream", "sequence", "type", "body", "causation_id", "correlation_id", "caused_by", "created_at", "traceparent", "schema_version"]
  const rows = facts.map((f) => [f.tenant_id, f.fact_id, f.stream, f.sequence, f.type, JSON.stringify(f.data), f.causation_id, f.correlation_id, f.caused_by, f.created_at, f.traceparent ?? null, f.schema_version ?? 1])
  return jsonChunks(rows).map((json) => ({
    sql: `INSERT INTO facts (${columns.join(", ")})
          SELECT ${positions(0, columns.length).join(", ")} FROM json_each(?) WHERE true
          ON CONFLICT DO NOTHING`,
    params: [json]
  }))
}
