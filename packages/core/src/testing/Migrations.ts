/// <reference path="./node-fs.d.ts" preserve="true" />
/**
 * The check an app's `npm test` runs so that a projection never reaches a deployment without its table:
 * every projection its modules register must have a table some migration creates (`CREATE TABLE`). It reads
 * the migrations folder's SQL files in Node; it does not open a database (the running platform's own check is
 * the scheduled run's: `CatchUp` records a projection whose table is missing `not_migrated`).
 */
import { readdirSync, readFileSync } from "node:fs"
import type { Module } from "../definitions/Module.js"
import * as Projection from "../definitions/Projection.js"

/** A registered projection whose table no migration creates. */
export interface Unmigrated {
  readonly projection: string
  readonly table: string
}

const created = (sql: string): ReadonlySet<string> =>
  new Set([...sql.matchAll(/CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?[`"[]?([A-Za-z0-9_]+)[`"\]]?/gi)].map((m) => m[1]!))

/** The projections of `modules` whose table none of `migrations` (SQL texts) creates. */
export const unmigrated = (modules: ReadonlyArray<Module>, migrations: ReadonlyArray<string>): ReadonlyArray<Unmigrated> => {
  const tables = new Set(migrations.flatMap((sql) => [...created(sql)]))
  return modules.flatMap((m) => m.projections).map((p) => ({ projection: p.name, table: Projection.tableName(p) })).filter((p) => !tables.has(p.table))
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
      `${missing.map((m) => `projection "${m.projection}": no migration in ${base.pathname} creates its table ${m.table}`).join("; ")}` +
        ` — generate it (npm run db:generate) and commit it; the deployment applies it (wrangler d1 migrations apply)`
    )
  }
}
