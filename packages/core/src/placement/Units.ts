/**
 * The projections consumer's units of work over the placement: a batch of many tenants' facts split by read database
 * and by what each database writes for them — a tenant's home (its facts copy and the projections it keeps at home)
 * or a database holding some of its projections (a tenant larger than one database). With no projection placed
 * elsewhere, a unit is a database. It reads the batch's placements once (cached per isolate, Placement.ts) and adds
 * no round trip per message; it does not decide what a unit writes (the consumer's plan does, from `Writers`).
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Sql from "../platform/Sql.js"
import { held, TenantPlacement } from "./Placement.js"
import * as Parts from "./Parts.js"

/** What one database's transaction writes for a tenant's items (the projections consumer's unit of work). */
export interface Writers {
  /** The tenant's home database: it writes the facts copy and every projection but `projections`. */
  readonly home: boolean
  /** At home: the projections left out (placed elsewhere, or held by their move); elsewhere: the projections placed there. */
  readonly projections: ReadonlyArray<string>
  /** Elsewhere, the projections in parts this database holds some parts of (Parts.ts): only the facts whose row is in them. */
  readonly parts?: Readonly<Record<string, Parts.Share>>
}

/** Whether a unit's writers write `projection`. */
export const writes = (writers: Writers, projection: string): boolean => writers.home !== writers.projections.includes(projection)

/** An item with what its unit writes for it. */
export interface Placed<T> {
  readonly item: T
  readonly writers: Writers
}

/**
 * Runs `run` once per unit — a read database and what it writes for its items: the home of the tenants placed there
 * (the facts copy and their projections not placed elsewhere), or a database holding some tenants' projections —
 * for a consumer batch of many tenants: each unit is its own transaction. With no projection placed elsewhere, a
 * unit is a database, as before; the lookup is the batch's one (cached) placement read, nothing per message.
 *
 * An item of a tenant whose writes are held, or that cannot be placed, gets `refused(error)` and runs nowhere. An
 * item that a held projection `concerns` (a move of that projection) runs in its other units and gets
 * `refused(held)` as well, so it is delivered again once the move switches (every write is idempotent). An item in
 * several units gets their results `merge`d.
 */
export const byDatabase = <T, O, E, R>(
  items: ReadonlyArray<T>,
  tenantOf: (item: T) => string,
  keyOf: (item: T) => string,
  run: (placed: ReadonlyArray<Placed<T>>) => Effect.Effect<ReadonlyMap<string, O>, E, R>,
  refused: (error: Sql.SqlFailure) => O,
  options: { readonly merge: (a: O, b: O) => O; readonly concerns: (projection: string, item: T) => boolean }
): Effect.Effect<ReadonlyMap<string, O>, E, Exclude<R, Sql.ReadDatabase> | TenantPlacement> =>
  Effect.gen(function*() {
    const shape = yield* TenantPlacement
    const out = new Map<string, O>()
    const settle = (key: string, outcome: O) => {
      const before = out.get(key)
      out.set(key, before === undefined ? outcome : options.merge(before, outcome))
    }
    if (items.length === 0) return out
    const placed = yield* Effect.result(shape.placements(items.map(tenantOf)))
    if (Result.isFailure(placed)) {
      for (const item of items) out.set(keyOf(item), refused(placed.failure))
      return out
    }
    const units = new Map<string, { readonly sql: Sql.Sql; readonly database: number; readonly writers: Writers; readonly items: Array<Placed<T>> }>()
    const unit = (item: T, database: number, writers: Writers) => {
      const id = `${database}|${writers.home}|${writers.projections.join(",")}|${JSON.stringify(writers.parts ?? {})}`
      let found = units.get(id)
      if (!found) units.set(id, (found = { sql: shape.databases[database]!, database, writers, items: [] }))
      found.items.push({ item, writers })
    }
    for (const item of items) {
      const placement = placed.success.get(tenantOf(item))!
      if (placement.frozenSince !== null) {
        settle(keyOf(item), refused(held(placement.tenantId)))
        continue
      }
      const away: Array<string> = []
      const elsewhere = new Map<number, { readonly names: Array<string>; readonly parts: Record<string, Parts.Share> }>()
      const there = (database: number) => elsewhere.get(database) ?? elsewhere.set(database, { names: [], parts: {} }).get(database)!
      let heldHere: string | undefined
      for (const [name, p] of Object.entries(placement.projections)) {
        if (p.frozenSince !== null) {
          away.push(name)
          if (options.concerns(name, item)) heldHere ??= name
        } else if (p.parts) {
          // In parts: each part's database writes the facts whose row is in its parts (the consumer's plan filters).
          away.push(name)
          for (const [database, share] of Parts.shares(p.parts)) (there(database).names.push(name), (there(database).parts[name] = share))
        } else if (p.database !== placement.database) {
          away.push(name)
          there(p.database).names.push(name)
        }
      }
      if (heldHere !== undefined) settle(keyOf(item), refused(held(placement.tenantId, heldHere)))
      unit(item, placement.database, { home: true, projections: away.sort() })
      for (const [database, { names, parts }] of elsewhere) {
        if (names.some((name) => options.concerns(name, item))) {
          unit(item, database, { home: false, projections: names.sort(), ...(Object.keys(parts).length > 0 ? { parts } : {}) })
        }
      }
    }
    for (const group of [...units.values()].sort((a, b) => a.database - b.database || Number(b.writers.home) - Number(a.writers.home))) {
      const results = yield* Effect.provideService(run(group.items), Sql.ReadDatabase, group.sql)
      for (const [key, value] of results) settle(key, value)
    }
    return out
  })
