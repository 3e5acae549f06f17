/// <reference path="./node-sqlite.d.ts" preserve="true" />
/**
 * `memoryD1()` — a `D1Database` over an in-memory SQLite database (`node:sqlite`): D1 is SQLite, so the
 * framework's real statements run unchanged (`json_each`, upserts, `RETURNING`); `batch()` is one transaction,
 * as in D1. With the value binding, row normalising and transaction helpers the in-memory Durable Object storage
 * shares (MemoryBindings). MemoryBindings re-exports `memoryD1` and `MemoryD1Database`.
 */
import { DatabaseSync } from "node:sqlite"

type Param = string | number | bigint | null | Uint8Array

export const bindable = (value: unknown): Param => {
  if (value === undefined || value === null) return null
  if (typeof value === "boolean") return value ? 1 : 0
  if (typeof value === "number" || typeof value === "string" || typeof value === "bigint" || value instanceof Uint8Array) return value
  if (value instanceof ArrayBuffer) return new Uint8Array(value)
  throw new TypeError(`cannot bind a ${typeof value} to SQLite`)
}

export const normalize = (row: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(row)) out[k] = typeof v === "bigint" ? Number(v) : v
  return out
}

export const transaction = <T>(db: DatabaseSync, run: () => T): T => {
  if (db.isTransaction) return run()
  db.exec("BEGIN")
  try {
    const result = run()
    db.exec("COMMIT")
    return result
  } catch (error) {
    db.exec("ROLLBACK")
    throw error
  }
}

class MemoryD1Statement implements D1PreparedStatement {
  constructor(readonly db: DatabaseSync, readonly query: string, readonly params: ReadonlyArray<Param> = []) {}
  bind(...values: Array<unknown>) {
    return new MemoryD1Statement(this.db, this.query, values.map(bindable))
  }
  /** Runs the statement: its rows (if any) and the number of rows it changed. */
  execute(): { results: Array<Record<string, unknown>>; changes: number } {
    const statement = this.db.prepare(this.query)
    if (statement.columns().length > 0) return { results: statement.all(...this.params).map(normalize), changes: 0 }
    const { changes } = statement.run(...this.params)
    return { results: [], changes: Number(changes) }
  }
  /** As D1 answers: the rows, typed as the caller asks (as D1's own `all<T>` does), and the meta. */
  result<T>(): D1Result<T> {
    const { results, changes } = this.execute()
    return { results: results as Array<T>, success: true, meta: { changes, rows_read: results.length, rows_written: changes, duration: 0, last_row_id: 0, changed_db: changes > 0, size_after: 0 } }
  }
  async all<T = Record<string, unknown>>() {
    return this.result<T>()
  }
  async run<T = Record<string, unknown>>() {
    return this.result<T>()
  }
  async first<T = Record<string, unknown>>(column?: string): Promise<T | null> {
    const row = this.execute().results[0]
    if (row === undefined) return null
    return (column === undefined ? row : row[column]) as T
  }
  raw<T = Array<unknown>>(options: { columnNames: true }): Promise<[Array<string>, ...Array<T>]>
  raw<T = Array<unknown>>(options?: { columnNames?: false }): Promise<Array<T>>
  async raw<T = Array<unknown>>(options?: { columnNames?: boolean }): Promise<Array<T> | [Array<string>, ...Array<T>]> {
    const rows = this.execute().results.map((r) => Object.values(r) as T)
    return options?.columnNames === true ? [this.db.prepare(this.query).columns().map((c) => c.name), ...rows] : rows
  }
}

/** Runs D1 statements of this module as one transaction, in order, as D1's `batch()` does. */
const runBatch = <T>(sqlite: DatabaseSync, statements: ReadonlyArray<D1PreparedStatement>): Array<D1Result<T>> =>
  transaction(sqlite, () =>
    statements.map((statement) => {
      if (!(statement instanceof MemoryD1Statement)) throw new TypeError("memoryD1().batch() takes statements prepared by the same in-memory database")
      return statement.result<T>()
    }))

/** An in-memory D1 database. `sqlite` is the underlying database, for setup and inspection. */
export class MemoryD1Database implements D1Database {
  readonly sqlite = new DatabaseSync(":memory:")
  prepare(query: string) {
    return new MemoryD1Statement(this.sqlite, query)
  }
  async batch<T = unknown>(statements: Array<D1PreparedStatement>) {
    return runBatch<T>(this.sqlite, statements)
  }
  async exec(query: string) {
    this.sqlite.exec(query)
    return { count: 1, duration: 0 }
  }
  async dump() {
    return new ArrayBuffer(0)
  }
  /** One database, one session: every read sees every write. */
  withSession(): D1DatabaseSession {
    return { prepare: (query) => this.prepare(query), batch: (statements) => this.batch(statements), getBookmark: () => null }
  }
}

export const memoryD1 = (): MemoryD1Database => new MemoryD1Database()
