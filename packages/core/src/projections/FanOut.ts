/**
 * A page of a tenant's projection rows wherever they live: the one database holding the projection (its home, or
 * where it was moved), or — for a projection in parts (placement/Parts.ts) — its parts. A query that names every key
 * column reads the one part holding that row; any other asks every part for the same page (each its first
 * `limit + 1` rows after the cursor, in key order) and merges them in key order, as SQLite orders the key (NULL,
 * then numbers, then text by its UTF-8 bytes; integer columns exactly, past 2^53 too), keeping the first
 * `limit + 1`: the union's first rows after the cursor are among them, so the page and its cursor are exactly those
 * of one database holding every row. It adds one read per part, in parallel; it does not change what a page is
 * (ProjectionQuery.rows builds it) nor decode booleans (the caller does).
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Cursor from "../tables/Cursor.js"
import * as Projection from "../definitions/Projection.js"
import * as Parts from "../placement/Parts.js"
import { TenantPlacement } from "../placement/Placement.js"
import * as Sql from "../platform/Sql.js"
import { compareText } from "../platform/TextOrder.js"
import * as ProjectionQuery from "./ProjectionQuery.js"

type Value = string | number | null

const big = (v: Value): bigint | undefined =>
  typeof v === "number" ? (Number.isInteger(v) ? BigInt(v) : undefined) : typeof v === "string" && /^-?\d+$/.test(v) ? BigInt(v) : undefined

const rank = (v: Value) => (v === null ? 0 : typeof v === "number" ? 1 : 2)

/** Two values of a key column as SQLite orders them. */
export const compareValues = (a: Value, b: Value, integer: boolean): number => {
  if (integer && a !== null && b !== null) {
    const [x, y] = [big(a), big(b)]
    if (x !== undefined && y !== undefined) return x === y ? 0 : x < y ? -1 : 1
  }
  if (rank(a) !== rank(b)) return rank(a) - rank(b)
  if (typeof a === "number" && typeof b === "number") return a === b ? 0 : a < b ? -1 : 1
  if (typeof a === "string" && typeof b === "string") return compareText(a, b)
  return 0
}

/** Rows of `p` in its key's order. */
export const byKey = (p: Projection.Projection) => (a: Readonly<Record<string, Value>>, b: Readonly<Record<string, Value>>): number => {
  for (const column of p.key) {
    const c = compareValues(a[column] ?? null, b[column] ?? null, Projection.isIntegerColumn(p, column))
    if (c !== 0) return c
  }
  return 0
}

/** The part a query names by every key column (equality filters), if it does: its row can only be there. */
const partNamed = (p: Projection.Projection, query: Readonly<Record<string, string | undefined>>, k: number): number | undefined => {
  const booleans = Projection.booleanColumns(p)
  const values: Array<string> = []
  for (const column of p.key) {
    const value = query[column]
    if (value === undefined) return undefined
    values.push(booleans.includes(column) ? (value === "true" || value === "1" ? "1" : "0") : value)
  }
  return Parts.partOf(values, k)
}

/**
 * The rows of a page of `p` for `tenantId` (`limit + 1` at most, as one database answers: the caller slices and
 * builds the cursor with `page.nextCursor`), read where the tenant's projection lives.
 */
export const read = (p: Projection.Projection, tenantId: string, query: Readonly<Record<string, string | undefined>>, page: ProjectionQuery.Page) =>
  Effect.gen(function*() {
    const shape = yield* TenantPlacement
    const placement = (yield* shape.placements([tenantId])).get(tenantId)!
    const parts = Parts.partsOf(placement, p.name)
    const on = (sql: Sql.Sql) => Effect.provideService(ProjectionQuery.run(page), Sql.ReadDatabase, sql)
    if (parts === undefined) return yield* on((yield* Parts.doors(shape, tenantId, false, p.name))[0]!)
    const named = partNamed(p, query, parts.length)
    if (named !== undefined) return yield* on(shape.databases[parts[named]!]!)
    const pages = yield* Effect.forEach([...Parts.shares(parts)], ([d, share]) => ofShare(p, tenantId, query, page, shape.databases[d]!, share), { concurrency: "unbounded" })
    return pages.flat().sort(byKey(p)).slice(0, page.limit + 1)
  })

/**
 * One database's first `limit + 1` rows of its parts after the query's cursor. Until a split's drop, the database it
 * left still holds rows of parts now elsewhere: those are skipped, and the next page read when too few are left.
 */
const ofShare = (p: Projection.Projection, tenantId: string, query: Readonly<Record<string, string | undefined>>, page: ProjectionQuery.Page, sql: Sql.Sql, share: Parts.Share) =>
  Effect.gen(function*() {
    const mine: Array<Readonly<Record<string, Value>>> = []
    for (let next = page; ;) {
      const rows = yield* Effect.provideService(ProjectionQuery.run(next), Sql.ReadDatabase, sql)
      mine.push(...rows.filter((row) => share.here.includes(Parts.partOfRow(p, row, share.of))))
      if (rows.length <= page.limit || mine.length > page.limit) return mine.slice(0, page.limit + 1)
      const after = Result.getOrUndefined(ProjectionQuery.rows(p, tenantId, { ...query, cursor: Cursor.encode(p.key.map((k) => rows.at(-1)![k] as Projection.Value)) }))
      if (after === undefined) return mine.slice(0, page.limit + 1)
      next = after
    }
  })
