/**
 * `CREATE TABLE` / `CREATE INDEX` statements from a Drizzle SQLite table, for
 * the in-memory databases of the test kit: columns with their SQL types,
 * `NOT NULL`, literal defaults, primary keys (single or composite), unique
 * constraints and indexes. Runtime defaults (`$defaultFn`) and SQL-expression
 * defaults are left out: the framework's statements always supply values. The
 * real schema comes from the migrations drizzle-kit generates.
 */
import { getTableConfig, type SQLiteTable } from "drizzle-orm/sqlite-core"

const q = (identifier: string) => `"${identifier.replace(/"/g, '""')}"`

const literal = (value: unknown): string | undefined => {
  if (typeof value === "number" || typeof value === "bigint") return String(value)
  if (typeof value === "boolean") return value ? "1" : "0"
  if (typeof value === "string") return `'${value.replace(/'/g, "''")}'`
  if (value === null) return "NULL"
  return undefined
}

export const createTable = (table: SQLiteTable): ReadonlyArray<string> => {
  const config = getTableConfig(table)
  const composite = config.primaryKeys.length > 0
  const columns = config.columns.map((c) => {
    const parts = [q(c.name), c.getSQLType()]
    if (c.primary && !composite) parts.push("PRIMARY KEY")
    if (c.notNull) parts.push("NOT NULL")
    const fallback = c.hasDefault ? literal(c.default) : undefined
    if (fallback !== undefined) parts.push(`DEFAULT ${fallback}`)
    if (c.isUnique) parts.push("UNIQUE")
    return parts.join(" ")
  })
  const constraints = [
    ...config.primaryKeys.map((pk) => `PRIMARY KEY (${pk.columns.map((c) => q(c.name)).join(", ")})`),
    ...config.uniqueConstraints.map((u) => `UNIQUE (${u.columns.map((c) => q(c.name)).join(", ")})`)
  ]
  const indexes = config.indexes.map((index) => {
    const { name, columns: on, unique } = index.config
    const names = on.map((c) => ("name" in c ? q((c as { name: string }).name) : "")).filter((c) => c !== "")
    return `CREATE ${unique ? "UNIQUE " : ""}INDEX IF NOT EXISTS ${q(name)} ON ${q(config.name)} (${names.join(", ")})`
  })
  return [`CREATE TABLE IF NOT EXISTS ${q(config.name)} (${[...columns, ...constraints].join(", ")})`, ...indexes]
}
