/**
 * A tenant's projection in parts: one projection too large for one read database (the largest tenant's largest
 * unit) is placed as k parts (k = 2, 4, 8 or 16) on read databases — one may hold several, one may be where the
 * projection was (`projection_placements.parts`, the database of each part, put there by a split, Split.ts). A row of the tenant lives in part `hash(its key) mod k`:
 * the key is the projection's key columns after `tenant_id` (`Projection.key`), as the JSON text of their values
 * as text, hashed with FNV-1a (32 bits, over UTF-16 code units),
 * so the part of a row never changes and every writer — live traffic, a rebuild, a copy — finds the same one.
 *
 * This module answers where: the part of a row or of a fact, the databases of a projection (every part's, for a
 * cleaning or a fan-out read), facts grouped by the database of their row. It does not write anything. An additive
 * projection's applied set: live traffic records a fact's id in the part of the row it counted (a redelivery is
 * judged there); a split copies the set to every part.
 */
import * as Effect from "effect/Effect"
import type { Fact } from "@factline/schemas"
import * as Projection from "../definitions/Projection.js"
import type * as Sql from "../platform/Sql.js"
import * as Failure from "../failures/Failure.js"
import { type Placement, grouped as groupedWhole, type Shape } from "./Placement.js"

/** The part counts a projection may be split into. */
export const counts = [2, 4, 8, 16] as const

/** A unit's share of a projection in parts: of how many parts, and which of them its database holds. */
export interface Share {
  readonly of: number
  readonly here: ReadonlyArray<number>
}

/** A key value as text: what SQLite's column affinity makes of it, so a key bound as 1 and read back as 1 hash alike. */
const text = (value: unknown): string | null =>
  value === null || value === undefined ? null : typeof value === "boolean" ? (value ? "1" : "0") : String(value)

/** FNV-1a over the key's values as text: stable across runtimes and releases (a row's part must never change). */
export const hash = (key: ReadonlyArray<unknown>): number => {
  const input = JSON.stringify(key.map(text))
  let h = 0x811c9dc5
  for (let i = 0; i < input.length; i++) {
    h ^= input.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h >>> 0
}

/** The part of a row with these key values (the projection's key columns after `tenant_id`), of `k`. */
export const partOf = (key: ReadonlyArray<unknown>, k: number): number => hash(key) % k

/** The part of a stored row of `p` (its key columns read from the row). */
export const partOfRow = (p: Projection.Projection, row: Readonly<Record<string, unknown>>, k: number): number =>
  partOf(p.key.map((c) => row[c]), k)

/**
 * The part of the row `fact` changes in `p`, of `k`: part 0 when it changes none or its mapping throws (the unit
 * holding part 0 reports the failure, once).
 */
export const partOfFact = (p: Projection.Projection, fact: Fact, k: number): number => {
  try {
    const out = p.byType.get(fact.type)?.(fact)
    if (out === undefined) return 0
    const key: Readonly<Record<string, unknown>> = p.kind === "rows" ? (out as Projection.Row) : ((out as Projection.AdditiveChange).key ?? {})
    return partOf(p.key.map((c) => key[c]), k)
  } catch {
    return 0
  }
}

/** Whether a unit holding `share` of `p` writes `fact`'s row (no share: the projection is whole there). */
export const holds = (p: Projection.Projection, fact: Fact, share: Share | undefined): boolean =>
  share === undefined || share.here.includes(partOfFact(p, fact, share.of))

/** The databases of the tenant's `projection` in parts, by part; undefined when it is placed whole. */
export const partsOf = (placement: Placement, projection: string): ReadonlyArray<number> | undefined =>
  placement.projections[projection]?.parts ?? undefined

/** Each distinct database of a projection's parts with the parts it holds. */
export const shares = (parts: ReadonlyArray<number>): ReadonlyMap<number, Share> => {
  const out = new Map<number, Share>()
  parts.forEach((database, part) => out.set(database, { of: parts.length, here: [...(out.get(database)?.here ?? []), part] }))
  return out
}

/**
 * Every database holding the tenant's `projection`: its parts' (in part order, each once), or the one it lives in.
 * For writes, refused while held (a move or a split of it), as `Placement.door`.
 */
export const doors = (shape: Shape, tenantId: string, write: boolean, projection: string): Effect.Effect<ReadonlyArray<Sql.Sql>, Sql.SqlFailure> =>
  Effect.map(placed(shape, tenantId, write, projection), (all) => all.map((one) => one.sql))

/**
 * As `doors`, each database with the share of the parts it holds (none: the projection is whole there). A reader
 * keeps only its share's rows: until a split's drop, the database it left still holds rows of parts now elsewhere.
 */
export const placed = (shape: Shape, tenantId: string, write: boolean, projection: string): Effect.Effect<ReadonlyArray<{ readonly sql: Sql.Sql; readonly share?: Share }>, Sql.SqlFailure> =>
  Effect.gen(function*() {
    const placement = (yield* shape.placements([tenantId])).get(tenantId)!
    const parts = partsOf(placement, projection)
    if (parts === undefined) return [{ sql: yield* door(shape, tenantId, write, projection) }]
    if (write) yield* door(shape, tenantId, true, projection)
    return [...shares(parts)].map(([d, share]) => ({ sql: shape.databases[d]!, share }))
  })

/** Whether a stored row of `p` is in `share` (no share: the projection is whole there). */
export const inShare = (p: Projection.Projection, row: Readonly<Record<string, unknown>>, share: Share | undefined): boolean =>
  share === undefined || share.here.includes(partOfRow(p, row, share.of))

const door = (shape: Shape, tenantId: string, write: boolean, projection: string) =>
  Effect.flatMap(groupedWhole(shape, [tenantId], (t) => t, write, projection), (groups) => Effect.succeed(groups[0]!.sql))

/**
 * Facts grouped by the read database holding their row of `p` (each tenant's part of it, or the database the
 * projection lives in whole), input order kept within a group: a rebuild's replay.
 */
export const grouped = (shape: Shape, p: Projection.Projection, facts: ReadonlyArray<Fact>) =>
  Effect.gen(function*() {
    if (facts.length === 0) return []
    const placements = yield* shape.placements(facts.map((f) => f.tenant_id))
    const whole = facts.filter((f) => partsOf(placements.get(f.tenant_id)!, p.name) === undefined)
    const groups = new Map<number, { readonly sql: Sql.Sql; readonly items: Array<Fact> }>()
    for (const fact of facts) {
      const parts = partsOf(placements.get(fact.tenant_id)!, p.name)
      if (parts === undefined) continue
      const database = parts[partOfFact(p, fact, parts.length)]!
      let group = groups.get(database)
      if (!group) groups.set(database, (group = { sql: shape.databases[database]!, items: [] }))
      group.items.push(fact)
    }
    return [...(yield* groupedWhole(shape, whole, (f) => f.tenant_id, false, p.name)), ...groups.values()]
  })

/**
 * What a move request asks: the read database it moves to, and the parts of a split (`parts` with `projection`,
 * instead of `to_database`): 2, 4, 8 or 16 bound read databases. Its problems otherwise (a 400, nothing started).
 */
export const request = (to: number | undefined, projection: string | undefined, parts: ReadonlyArray<number> | undefined, databases: number) => {
  const invalid = (path: string, message: string) => Effect.fail(new Failure.InvalidInput({ message: `${path} ${message}`, problems: [{ path, message }] }))
  if (parts === undefined) return to === undefined ? invalid("to_database", "is required (or, with projection, parts)") : Effect.succeed({ to, parts: undefined })
  if (to !== undefined) return invalid("parts", "replaces to_database: send one of them")
  if (projection === undefined) return invalid("parts", "splits one projection: send projection with it")
  if (!(counts as ReadonlyArray<number>).includes(parts.length)) return invalid("parts", `must list 2, 4, 8 or 16 read databases (one per part), got ${parts.length}`)
  const bad = parts.findIndex((d) => !Number.isInteger(d) || d < 0 || d >= databases)
  if (bad >= 0) return invalid(`parts[${bad}]`, `must be a read database index from 0 to ${databases - 1}`)
  return Effect.succeed({ to: parts[0]!, parts })
}
