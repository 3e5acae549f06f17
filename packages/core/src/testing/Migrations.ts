/// <reference path="./node-fs.d.ts" preserve="true" />
/**
 * The check an app's `npm test` runs so that a projection never reaches a deployment without its table or a
 * column of it: every projection its modules register must have a table some migration creates (`CREATE
 * TABLE`), with every column its Drizzle table declares (created, or added by a later `ALTER TABLE … ADD`;
 * renames, drops and drizzle-kit's `__new_<table>` rebuilds followed in order). It reads
 * the migrations folder's SQL files in Node; it does not open a database (the running platform's own check is
 * the scheduled run's: `CatchUp` records a projection whose table is missing `not_migrated`).
 */
import { readdirSync, readFileSync } from "node:fs"
import type { Module } from "../definitions/Module.js"
import * as Projection from "../definitions/Projection.js"

/** A registered projection whose table no migration creates, or whose columns (`columns`) none adds. */
export interface Unmigrated {
  readonly projection: string
  readonly table: string
  /** The table's columns no migration creates or adds (absent: the table itself is missing). */
  readonly columns?: ReadonlyArray<string>
}

const name = "[`\"[]?([A-Za-z0-9_]+)[`\"\\]]?"
const createTable = new RegExp(`^CREATE\\s+TABLE\\s+(?:IF\\s+NOT\\s+EXISTS\\s+)?${name}\\s*\\(([\\s\\S]*)\\)`, "i")
const addColumn = new RegExp(`^ALTER\\s+TABLE\\s+${name}\\s+ADD\\s+(?:COLUMN\\s+)?${name}`, "i")
const renameColumn = new RegExp(`^ALTER\\s+TABLE\\s+${name}\\s+RENAME\\s+COLUMN\\s+${name}\\s+TO\\s+${name}`, "i")
const dropColumn = new RegExp(`^ALTER\\s+TABLE\\s+${name}\\s+DROP\\s+COLUMN\\s+${name}`, "i")
const renameTable = new RegExp(`^ALTER\\s+TABLE\\s+${name}\\s+RENAME\\s+TO\\s+${name}`, "i")
const dropTable = new RegExp(`^DROP\\s+TABLE\\s+(?:IF\\s+EXISTS\\s+)?${name}`, "i")
const columnLine = new RegExp(`^\\s*${name}\\s+\\w`)

/** The tables and their columns after applying `migrations` (SQL texts, in order) — their DDL only. */
export const migratedTables = (migrations: ReadonlyArray<string>): ReadonlyMap<string, ReadonlySet<string>> => {
  const tables = new Map<string, Set<string>>()
  const statements = migrations.flatMap((sql) => sql.split(/--> statement-breakpoint|;\s*\n/)).map((s) => s.replace(/^(\s*--[^\n]*\n)*/, "").trim())
  for (const statement of statements) {
    let m: RegExpExecArray | null
    if ((m = createTable.exec(statement)) !== null) {
      const columns = m[2]!.split("\n").map((line) => columnLine.exec(line)?.[1]).filter((c): c is string => c !== undefined && !/^(PRIMARY|FOREIGN|UNIQUE|CONSTRAINT|CHECK)$/i.test(c))
      tables.set(m[1]!, new Set(columns))
    } else if ((m = addColumn.exec(statement)) !== null) tables.get(m[1]!)?.add(m[2]!)
    else if ((m = renameColumn.exec(statement)) !== null) {
      const columns = tables.get(m[1]!)
      if (columns?.delete(m[2]!)) columns.add(m[3]!)
    } else if ((m = dropColumn.exec(statement)) !== null) tables.get(m[1]!)?.delete(m[2]!)
    else if ((m = renameTable.exec(statement)) !== null) {
      const columns = tables.get(m[1]!)
      tables.delete(m[1]!)
      if (columns !== undefined) tables.set(m[2]!, columns)
    } else if ((m = dropTable.exec(statement)) !== null) tables.delete(m[1]!)
  }
  return tables
}

/** The projections of `modules` whose table, or some of its columns, none of `migrations` (SQL texts, in order) creates. */
export const unmigrated = (modules: ReadonlyArray<Module>, migrations: ReadonlyArray<string>): ReadonlyArray<Unmigrated> => {
  const tables = migratedTables(migrations)
  return modules.flatMap((m) => m.projections).flatMap((p): ReadonlyArray<Unmigrated> => {
    const table = Projection.tableName(p)
    const migrated = tables.get(table)
    if (migrated === undefined) return [{ projection: p.name, table }]
    const columns = ["tenant_id", ...Projection.columnNames(p)].filter((c) => !migrated.has(c))
    return columns.length === 0 ? [] : [{ projection: p.name, table, columns }]
  })
}

/**
 * Throws, naming each projection and its table, when a projection of `modules` has no migration in `folder`
 * (a `file:` URL of the migrations folder, e.g. `new URL("../migrations/", import.meta.url)`).
 */
export const checkMigrations = (modules: ReadonlyArray<Module>, folder: URL): void => {
  const base = folder.href.endsWith("/") ? folder : new URL(`${folder.href}/`)
  const files = readdirSync(base).filter((name) => name.endsWith(".sql")).sort()
  const missing = unmigrated(modules, files.map((name) => readFileSync(new URL(name, base), "utf8")))
  if (missing.length > 0) {
    throw new Error(
      `${missing.map((m) => m.columns === undefined
        ? `projection "${m.projection}": no migration in ${base.pathname} creates its table ${m.table}`
        : `projection "${m.projection}": no migration in ${base.pathname} adds column(s) ${m.columns.join(", ")} of its table ${m.table}`).join("; ")}` +
        ` — generate it (npm run db:generate) and commit it; the deployment applies it (wrangler d1 migrations apply)`
    )
  }
}
