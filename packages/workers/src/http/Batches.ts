/**
 * The batch job routes besides `POST /v1/batches` (Api.ts):
 * - `GET /v1/batches?status=&cursor=&limit=`: the caller's batch jobs — imports,
 *   exports, reconciles (`batch_jobs`) and rebuilds (`projection_rebuilds`) —
 *   newest first;
 * - `GET /v1/batches/:id`: one job with its progress and first errors;
 * - `POST /v1/batches/:id/cancel`: stops further chunks of a queued or running job;
 * - `GET /v1/batches/:id/output`: a succeeded export's file, streamed from R2 part by part;
 * - `PUT /v1/batches/uploads/:name` (scope `admin`): an import's NDJSON file, streamed to R2 under the
 *   caller's tenant (`<tenant>/uploads/<name>`, at most 1 GiB, `content-length` required), read by the
 *   import job by byte range.
 * All scope `admin` or `platform` and tenant-scoped: a record is shown or
 * cancelled only for the tenant of the token that started it (the platform's
 * rebuilds for the platform's tokens); another tenant's id is the same 404 as
 * an unknown one.
 */
import { Effect } from "effect"
import type { Hono } from "hono"
import { BatchJobs, Cursor, Export, ProjectionStore, Rebuild } from "@factline/core"
import type { PlatformEnv } from "../Env.js"
import type { PlatformServices } from "../Services.js"
import type { AuthVariables } from "./Auth.js"
import { authenticate } from "./Routes.js"
import { errorResponse } from "./Errors.js"
import { strictQuery } from "./StrictQuery.js"

type AppEnv = { Bindings: PlatformEnv; Variables: AuthVariables }

export interface Deps {
  readonly run: <A, E>(env: PlatformEnv, program: Effect.Effect<A, E, PlatformServices>) => Promise<{ readonly _tag: "Success"; readonly success: A } | { readonly _tag: "Failure"; readonly failure: E }>
}

/** Job statuses, and a rebuild's own (`completed` is a rebuild that succeeded). */
const statuses = [...BatchJobs.statuses, "completed"]

const encodeCursor = (startedAt: string, id: string) => Cursor.encode([startedAt, id])
const decodeCursor = (cursor: string) => Cursor.decode(cursor, ["string", "string"]) as [string, string] | undefined

/** A rebuild record as a batch job: its progress is in shards, its items are the replayed facts. */
export const rebuildView = (record: Rebuild.RebuildRecord) => ({
  batch_id: record.id,
  operation: "rebuild" as const,
  ...record,
  offset: record.shards_done,
  total: record.shards_total,
  succeeded: record.facts_replayed,
  failed: record.facts_failed,
  created_at: record.started_at
})

const unavailable = (c: Parameters<typeof errorResponse>[0]) => {
  console.error("batches: the projection store is unavailable")
  return errorResponse(c, 503, "unavailable", "the projection store is unavailable, retry later", undefined, { "retry-after": "5" })
}

export const mount = (app: Hono<AppEnv>, { run }: Deps) => {
  app.get("/v1/batches", authenticate("GET /v1/batches"), strictQuery(["status", "cursor", "limit"]), async (c) => {
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

    const tenantId = c.get("principal").tenantId
    // Each table gives at most limit + 1 rows past the cursor; merged newest first, the page is exact.
    const page = (table: string, at: string) => {
      const clauses = ["tenant_id = ?", ...(status !== undefined ? ["status = ?"] : []), ...(cursor ? [`(${at}, id) < (?, ?)`] : [])]
      return {
        sql: `SELECT * FROM ${table} WHERE ${clauses.join(" AND ")} ORDER BY ${at} DESC, id DESC LIMIT ?`,
        params: [tenantId, ...(status !== undefined ? [status] : []), ...(cursor ?? []), limit + 1]
      }
    }
    const result = await run(c.env, Effect.flatMap(Effect.service(ProjectionStore.ProjectionStore), (store) =>
      Effect.all([store.query<Rebuild.RebuildRecord>(page("projection_rebuilds", "started_at")), store.query<BatchJobs.Row>(page("batch_jobs", "created_at"))])))
    if (result._tag === "Failure") return unavailable(c)
    const [rebuilds, jobs] = result.success
    const rows = [...rebuilds.map(rebuildView), ...jobs.map(BatchJobs.view)]
      .sort((a, b) => (a.created_at === b.created_at ? (a.batch_id < b.batch_id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1))
    const data = rows.slice(0, limit)
    const last = data.at(-1)
    return c.json({ data, next_cursor: rows.length > limit && last ? encodeCursor(last.created_at, last.batch_id) : null })
  })

  // Only the tenant that started a batch reads it; another tenant's id is the same 404 as a missing one.
  app.get("/v1/batches/:id", authenticate("GET /v1/batches/:id"), strictQuery([]), async (c) => {
    const tenantId = c.get("principal").tenantId
    const id = c.req.param("id")
    const result = await run(c.env, Effect.all([BatchJobs.get(tenantId, id), Rebuild.get(tenantId, id)]))
    if (result._tag === "Failure") return unavailable(c)
    const [job, rebuild] = result.success
    if (job) return c.json(BatchJobs.view(job))
    if (rebuild) return c.json(rebuildView(rebuild))
    return errorResponse(c, 404, "not_found", `no batch "${id}"`)
  })

  app.post("/v1/batches/:id/cancel", authenticate("POST /v1/batches/:id/cancel"), async (c) => {
    const tenantId = c.get("principal").tenantId
    const id = c.req.param("id")
    const result = await run(c.env, BatchJobs.cancel(tenantId, id, new Date().toISOString()))
    if (result._tag === "Success") return c.json(BatchJobs.view(result.success))
    const error = result.failure
    if (error._tag !== "BatchJobRefused") return unavailable(c)
    if (error.code === "not_found") {
      const rebuild = await run(c.env, Rebuild.get(tenantId, id))
      if (rebuild._tag === "Success" && rebuild.success) return errorResponse(c, 409, "conflict", "a rebuild cannot be cancelled; it ends when every shard is replayed")
    }
    return errorResponse(c, error.code === "conflict" ? 409 : 404, error.code, error.message)
  })

  app.get("/v1/batches/:id/output", authenticate("GET /v1/batches/:id/output"), strictQuery([]), async (c) => {
    const tenantId = c.get("principal").tenantId
    const id = c.req.param("id")
    const result = await run(c.env, BatchJobs.get(tenantId, id))
    if (result._tag === "Failure") return unavailable(c)
    const job = result.success
    if (!job) return errorResponse(c, 404, "not_found", `no batch "${id}"`)
    if (job.output_key === null || job.status !== "succeeded") {
      return errorResponse(c, 409, "conflict", `batch ${id} has no output${job.status === "succeeded" ? "" : ` (it is ${job.status})`}`)
    }
    // The job's own prefix under its own tenant: never built from the request.
    const prefix = Export.outputPrefix(job.tenant_id, job.id)
    const bucket = c.env.PAYLOADS
    const keys: Array<string> = []
    let cursor: string | undefined
    do {
      const listed = await bucket.list({ prefix, cursor })
      keys.push(...listed.objects.map((o) => o.key))
      cursor = listed.truncated ? listed.cursor : undefined
    } while (cursor !== undefined)
    keys.sort()
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>()
    const pipe = async () => {
      for (const key of keys) {
        const object = await bucket.get(key)
        if (object === null) throw new Error(`output part ${key} is missing`)
        await object.body.pipeTo(writable, { preventClose: true })
      }
      await writable.close()
    }
    c.executionCtx.waitUntil(pipe().catch((error) => writable.abort(error)))
    const format = (JSON.parse(job.params) as Export.Params).format
    return new Response(readable, {
      headers: {
        "content-type": format === "csv" ? "text/csv; charset=utf-8" : "application/x-ndjson",
        "content-disposition": `attachment; filename="${job.id}.${format}"`,
        "cache-control": "no-store"
      }
    })
  })
}

/** Upload names: a file name, never a path (the tenant prefix is the platform's, never the caller's). */
export const uploadName = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/
export const maxUploadBytes = 1024 * 1024 * 1024
export const uploadKey = (tenantId: string, name: string) => `${tenantId}/uploads/${name}`

export const mountUploads = (app: Hono<AppEnv>) => {
  app.put("/v1/batches/uploads/:name", authenticate("PUT /v1/batches/uploads/:name"), strictQuery([]), async (c) => {
    const name = c.req.param("name")
    if (!uploadName.test(name)) return errorResponse(c, 400, "invalid_request", "the name must be 1–128 letters, digits, '.', '_' or '-', starting with a letter or digit")
    const rawLength = c.req.header("content-length")
    if (rawLength === undefined || !/^\d+$/.test(rawLength)) return errorResponse(c, 411, "length_required", "send the file with a content-length header")
    const length = Number(rawLength)
    if (length > maxUploadBytes) return errorResponse(c, 413, "payload_too_large", `an upload is at most ${maxUploadBytes} bytes (1 GiB); got ${length}`)
    const body = c.req.raw.body
    if (body === null || length === 0) return errorResponse(c, 400, "invalid_request", "the file is empty")
    const key = uploadKey(c.get("principal").tenantId, name)
    try {
      // Streamed: R2 takes the body with its declared length, never buffered here.
      const stream = body.pipeThrough(new FixedLengthStream(length))
      const object = await c.env.PAYLOADS.put(key, stream, { httpMetadata: { contentType: "application/x-ndjson" } })
      return c.json({ manifest: name, size: object?.size ?? length }, 201)
    } catch {
      console.error("upload failed: the payload store is unavailable or the body did not match its content-length")
      return errorResponse(c, 400, "upload_failed", "the upload did not complete (the body must match its content-length); send it again")
    }
  })
}
