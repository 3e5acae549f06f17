/**
 * `GET /v1/batches?status=&cursor=&limit=`: the caller's batch jobs, newest first
 * (scope `admin` or `platform`). Tenant-scoped like `GET /v1/batches/:id`: a
 * record is listed only to the tenant of the token that started it (the
 * platform's rebuilds to the platform's tokens), never another tenant's.
 */
import { Effect } from "effect"
import type { Hono } from "hono"
import { ProjectionStore, type Rebuild } from "@factline/core"
import type { PlatformEnv } from "../Env.js"
import type { PlatformServices } from "../Services.js"
import { type AuthVariables, requireScope } from "./Auth.js"
import { errorResponse } from "./Errors.js"
import { strictQuery } from "./StrictQuery.js"

type AppEnv = { Bindings: PlatformEnv; Variables: AuthVariables }

export interface Deps {
  readonly run: <A, E>(env: PlatformEnv, program: Effect.Effect<A, E, PlatformServices>) => Promise<{ readonly _tag: "Success"; readonly success: A } | { readonly _tag: "Failure"; readonly failure: E }>
}

const statuses = ["running", "completed", "failed"]

const encodeCursor = (startedAt: string, id: string) => btoa(JSON.stringify([startedAt, id])).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
const decodeCursor = (cursor: string): [string, string] | undefined => {
  try {
    const value = JSON.parse(atob(cursor.replace(/-/g, "+").replace(/_/g, "/"))) as unknown
    return Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === "string") ? (value as [string, string]) : undefined
  } catch {
    return undefined
  }
}

export const mount = (app: Hono<AppEnv>, { run }: Deps) => {
  app.get("/v1/batches", requireScope("admin", "platform"), strictQuery(["status", "cursor", "limit"]), async (c) => {
    const problems: Array<{ path: string; message: string }> = []
    const status = c.req.query("status")
    if (status !== undefined && !statuses.includes(status)) problems.push({ path: "status", message: `must be one of ${statuses.join(", ")}` })
    const rawLimit = c.req.query("limit")
    const limit = rawLimit === undefined ? 20 : /^\d+$/.test(rawLimit) ? Number(rawLimit) : NaN
    if (!(limit >= 1 && limit <= 100)) problems.push({ path: "limit", message: "must be a whole number from 1 to 100" })
    const rawCursor = c.req.query("cursor")
    const cursor = rawCursor === undefined ? undefined : decodeCursor(rawCursor)
    if (rawCursor !== undefined && cursor === undefined) problems.push({ path: "cursor", message: "malformed cursor; use next_cursor from a previous page" })
    if (problems.length > 0) return errorResponse(c, 400, "invalid_query", problems.map((p) => `${p.path}: ${p.message}`).join("; "), { problems })

    const clauses = ["tenant_id = ?", ...(status !== undefined ? ["status = ?"] : []), ...(cursor ? ["(started_at, id) < (?, ?)"] : [])]
    const params = [c.get("principal").tenantId, ...(status !== undefined ? [status] : []), ...(cursor ?? []), limit + 1]
    const result = await run(c.env, Effect.flatMap(Effect.service(ProjectionStore.ProjectionStore), (store) =>
      store.query<Rebuild.RebuildRecord>({ sql: `SELECT * FROM projection_rebuilds WHERE ${clauses.join(" AND ")} ORDER BY started_at DESC, id DESC LIMIT ?`, params })))
    if (result._tag === "Failure") {
      console.error("batch list: the projection store is unavailable")
      return errorResponse(c, 503, "unavailable", "the projection store is unavailable, retry later", undefined, { "retry-after": "5" })
    }
    const rows = result.success
    const data = rows.slice(0, limit)
    const last = data.at(-1)
    return c.json({
      data: data.map((record) => ({ batch_id: record.id, operation: "rebuild", ...record })),
      next_cursor: rows.length > limit && last ? encodeCursor(last.started_at, last.id) : null
    })
  })
}
