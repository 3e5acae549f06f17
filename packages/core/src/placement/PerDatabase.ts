/**
 * A store per database, built once and kept for the isolate (its caches live as long): what Placement.perDatabase
 * hands the stores routed by tenant. Keyed by the database's identity, not the binding object.
 */
import type * as Sql from "../platform/Sql.js"

/** `make` over each database, built once per database and kept (a store's caches live as long as the isolate). */
export const perDatabase = <S>(make: (sql: Sql.Sql) => S): (sql: Sql.Sql) => S => {
  const stores = new Map<object, S>()
  return (sql) => {
    let store = stores.get(sql.identity)
    if (store === undefined) stores.set(sql.identity, (store = make(sql)))
    return store
  }
}
