/**
 * A D1 database that refuses one copy page of a table (a copy page lost mid-step), for tests of resumable moves.
 * The same fault as projection-move.workers.test.ts's, shared by the split's test.
 */
import * as CountingBindings from "@factline/core/testing/bindings"

/**
 * A database whose first `batch` holding an `INSERT OR REPLACE INTO "<table>"` is refused before reaching it (a copy
 * page lost mid-step); everything else goes through. Statements are recorded by their SQL as they are prepared.
 */
export const refusingFirstCopyOf = (db: D1Database, table: string, refused: { count: number }): D1Database => {
  const recorded = new WeakMap<object, { readonly sql: string; readonly real: D1PreparedStatement }>()
  const copy = `INSERT OR REPLACE INTO "${table}"`
  const statement = (s: D1PreparedStatement, sql: string): D1PreparedStatement => {
    const proxy = new Proxy(s, { get: (t, p) => (p === "bind" ? (...args: Array<unknown>) => statement(t.bind(...args), sql) : typeof (t as any)[p] === "function" ? (t as any)[p].bind(t) : (t as any)[p]) })
    recorded.set(proxy, { sql, real: s })
    return proxy
  }
  const sqlOf = { get: (s: D1PreparedStatement) => recorded.get(s)?.sql }
  const real = (s: D1PreparedStatement) => recorded.get(s)?.real ?? s
  return new Proxy(db, {
    get(target, prop) {
      if (prop === CountingBindings.unwrap) return (target as any)[CountingBindings.unwrap] ?? target
      if (prop === "prepare") return (sql: string) => statement(target.prepare(sql), sql)
      if (prop === "batch") {
        return (statements: Array<D1PreparedStatement>) => {
          if (refused.count === 0 && statements.some((s) => sqlOf.get(s)?.startsWith(copy))) {
            refused.count++
            return Promise.reject(new Error(`injected fault: D1 refused a copy page of ${table}`))
          }
          return target.batch(statements.map(real))
        }
      }
      const value = (target as any)[prop]
      return typeof value === "function" ? value.bind(target) : value
    }
  })
}

