/**
 * The analysts' read API as SQL: the `facts` copy and registered
 * projections, always scoped to one tenant, keyset-paginated, with bound
 * parameters only. Filters are allowed only on columns a projection declares
 * queryable; anything else is a problem reported to the caller, never SQL.
 *
 * Cursors are opaque (base64url JSON of the last row's key) and are checked
 * on the way in: a malformed one is a problem, not an error from D1.
 *
 * Integers are never rounded on the way out: D1 stores 64-bit integers but
 * hands them to JavaScript as doubles, so an integer column is read as a
 * decimal string when its value is beyond ±(2^53 − 1) (a budget summed past
 * 2^53 cents), and as a number otherwise. Integer filters are bound as the
 * caller's digits (the column's affinity compares them as integers), never
 * through a double.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { Issues } from "@factline/schemas"
import * as Projection from "../definitions/Projection.js"
import * as Cursor from "../tables/Cursor.js"
import { ProjectionStore, Values } from "./ProjectionStore.js"

/** The page size of `GET /v1/facts` and `GET /v1/projections/:name` without a `limit`. */
export const defaultLimit = 50
/** The largest `limit` those routes accept. */
export const maxLimit = 500
/** Both, as the HTTP description states them (the `limit` parameter's `maximum` and `default`). */
export const pageLimit = { maximum: maxLimit, default: defaultLimit } as const

/** An integer column as it is selected: itself within the safe range, its exact decimal text beyond it. */
export const exactInteger = (column: string) =>
  `CASE WHEN "${column}" BETWEEN -${Projection.maxSafeInteger} AND ${Projection.maxSafeInteger} THEN "${column}" ELSE CAST("${column}" AS TEXT) END AS "${column}"`

const encodeCursor = (values: ReadonlyArray<Projection.Value>) => Cursor.encode(values)
const decodeCursor = (cursor: string, arity: number) => Cursor.decode(cursor, Array<Cursor.Kind>(arity).fill("value"))

const parseLimit = (raw: string | undefined, problems: Array<Issues.Problem>): number => {
  if (raw === undefined || raw === "") return defaultLimit
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > maxLimit) {
    problems.push({ path: "limit", message: `must be a whole number from 1 to ${maxLimit}` })
    return defaultLimit
  }
  return Number(raw)
}

export interface Page {
  readonly sql: Projection.Sql
  readonly limit: number
  /** Builds the next cursor from the last row of a full page. */
  readonly nextCursor: (rows: ReadonlyArray<Record<string, unknown>>) => string | null
}

/** Runs a page's query on the read database in scope (the caller's tenant's: Placement.reading): its rows, one past the page when there is a next. */
export const run = (page: Page) => Effect.flatMap(Effect.service(ProjectionStore), (store) => store.query(Values, page.sql))

const page = (limit: number, keyColumns: ReadonlyArray<string>, sql: Projection.Sql): Page => ({
  sql,
  limit,
  nextCursor: (rows) => {
    if (rows.length <= limit) return null
    const last = rows[limit - 1]!
    return encodeCursor(keyColumns.map((c) => last[c] as Projection.Value))
  }
})

const factsParameters = new Set(["subject", "type", "cursor", "limit"])
const unknownFactsParameters = (query: Readonly<Record<string, string | undefined>>, problems: Array<Issues.Problem>) => {
  for (const name of Object.keys(query)) if (!factsParameters.has(name)) problems.push({ path: name, message: "unknown query parameter (allowed: subject, type, cursor, limit)" })
}
const malformedCursor: Issues.Problem = { path: "cursor", message: "malformed cursor; use next_cursor from a previous page of the same listing" }

/**
 * `GET /v1/facts?subject=…`: one stream's facts, which the ledger holds in order, so it is read there (no D1
 * copy, no index): the stream, the type to keep, the sequence to start after (the cursor) and the page size.
 */
export interface StreamListing {
  readonly subject: string
  readonly type: string | undefined
  readonly after: number
  readonly limit: number
}

/** A stream listing's cursor: the last sequence read, as a one-element array (a copy listing's has two). */
export const streamCursor = (sequence: number): string => Cursor.encode([sequence])

/** The stream listing `query` asks for (it has a `subject`), or its problems. */
export const streamListing = (query: Readonly<Record<string, string | undefined>>): Result.Result<StreamListing, Array<Issues.Problem>> => {
  const problems: Array<Issues.Problem> = []
  unknownFactsParameters(query, problems)
  const limit = parseLimit(query.limit, problems)
  const cursor = query.cursor === undefined ? undefined : Cursor.decode(query.cursor, ["integer"])
  const after = cursor?.[0] as number | undefined
  if (query.cursor !== undefined && (after === undefined || after < 0 || !Number.isSafeInteger(after))) problems.push(malformedCursor)
  if (query.subject === undefined || query.subject === "") problems.push({ path: "subject", message: "must not be empty" })
  if (problems.length > 0) return Result.fail(problems)
  return Result.succeed({ subject: query.subject!, type: query.type, after: after ?? 0, limit })
}

/**
 * `GET /v1/facts?type=&cursor=&limit=` (no subject) from the D1 `facts` copy, ordered by (created_at,
 * fact_id): the primary key, walked in order. Whether the copy holds the facts asked for is the caller's
 * to check first (FactsCopy.holds).
 */
export const facts = (tenantId: string, query: Readonly<Record<string, string | undefined>>): Result.Result<Page, Array<Issues.Problem>> => {
  const problems: Array<Issues.Problem> = []
  unknownFactsParameters(query, problems)
  if (query.subject !== undefined) problems.push({ path: "subject", message: "one stream's facts are read from the ledger (streamListing), not the copy" })
  const limit = parseLimit(query.limit, problems)
  const cursor = query.cursor === undefined ? undefined : decodeCursor(query.cursor, 2)
  if (query.cursor !== undefined && cursor === undefined) problems.push(malformedCursor)
  if (problems.length > 0) return Result.fail(problems)
  const where = ["tenant_id = ?"]
  const params: Array<Projection.Value> = [tenantId]
  if (query.type !== undefined) (where.push("type = ?"), params.push(query.type))
  if (cursor) (where.push("(created_at, fact_id) > (?, ?)"), params.push(...cursor))
  return Result.succeed(page(limit, ["created_at", "fact_id"], {
    sql: `SELECT fact_id, stream AS subject, sequence, type, body, causation_id, correlation_id, caused_by, created_at, traceparent, schema_version
          FROM facts WHERE ${where.join(" AND ")} ORDER BY created_at, fact_id LIMIT ?`,
    params: [...params, limit + 1]
  }))
}

/** `GET /v1/projections/:name?<col>=<value>&cursor=&limit=`, ordered by the projection's key. */
export const rows = (
  p: Projection.Projection,
  tenantId: string,
  query: Readonly<Record<string, string | undefined>>
): Result.Result<Page, Array<Issues.Problem>> => {
  const problems: Array<Issues.Problem> = []
  const limit = parseLimit(query.limit, problems)
  const cursor = query.cursor === undefined ? undefined : decodeCursor(query.cursor, p.key.length)
  if (query.cursor !== undefined && cursor === undefined) problems.push({ path: "cursor", message: "malformed cursor; use next_cursor from a previous page" })
  const where = ["tenant_id = ?"]
  const params: Array<Projection.Value> = [tenantId]
  for (const [name, value] of Object.entries(query)) {
    if (name === "cursor" || name === "limit" || value === undefined) continue
    if (!p.queryable.includes(name)) {
      problems.push({ path: name, message: `not a queryable column of ${p.name} (queryable: ${p.queryable.join(", ")})` })
      continue
    }
    if (Projection.booleanColumns(p).includes(name)) {
      // Stored 0/1 (Drizzle's boolean mode), read back as booleans: filtered as booleans.
      if (!/^(true|false|1|0)$/.test(value)) {
        problems.push({ path: name, message: "must be true or false" })
        continue
      }
      where.push(`"${name}" = ?`)
      params.push(value === "true" || value === "1" ? 1 : 0)
    } else if (Projection.isIntegerColumn(p, name)) {
      if (!/^-?\d+$/.test(value)) {
        problems.push({ path: name, message: "must be a whole number" })
        continue
      }
      // The digits as text: INTEGER affinity converts them exactly; Number() would round past 2^53.
      where.push(`"${name}" = ?`)
      params.push(value)
    } else {
      where.push(`"${name}" = ?`)
      params.push(value)
    }
  }
  if (problems.length > 0) return Result.fail(problems)
  if (cursor) {
    where.push(`(${p.key.map((k) => `"${k}"`).join(", ")}) > (${p.key.map(() => "?").join(", ")})`)
    params.push(...cursor)
  }
  const columns = Projection.visibleColumns(p).filter((c) => c !== "tenant_id")
  return Result.succeed(page(limit, p.key, {
    sql: `SELECT ${columns.map((c) => (Projection.isIntegerColumn(p, c) ? exactInteger(c) : `"${c}"`)).join(", ")} FROM "${Projection.tableName(p)}"
          WHERE ${where.join(" AND ")} ORDER BY ${p.key.map((k) => `"${k}"`).join(", ")} LIMIT ?`,
    params: [...params, limit + 1]
  }))
}
