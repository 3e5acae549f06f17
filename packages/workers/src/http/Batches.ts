/**
 * The batch job routes:
 * - `POST /v1/batches`: starts a job — `import` (inline envelopes or an uploaded file), `export`,
 *   `reconcile` (scope `admin`, the caller's tenant) or `rebuild` (scope `platform`: every tenant's facts);
 * - `GET /v1/batches?status=&cursor=&limit=`: the caller's batch jobs — imports,
 *   exports, reconciles (`batch_jobs`) and rebuilds (`projection_rebuilds`) —
 *   newest first;
 * - `GET /v1/batches/:id`: one job with its progress and first errors;
 * - `POST /v1/batches/:id/cancel`: stops further chunks of a queued or running job;
 * - `GET /v1/batches/:id/output`: a succeeded export's file, streamed from R2 part by part;
 * - `PUT /v1/uploads/:name` (scope `admin`): an import's NDJSON file (`content-type: application/x-ndjson`,
 *   anything else is a 415), streamed to R2 under the caller's tenant (`<tenant>/uploads/<name>`, at most
 *   1 GiB, `content-length` required), read by the import job by byte range. Not under `/v1/batches/`: there
 *   `uploads/:name` and `:id/cancel` would match the same paths.
 * All scope `admin` or `platform` and tenant-scoped: a record is shown or
 * cancelled only for the tenant of the token that started it (the platform's
 * rebuilds for the platform's tokens); another tenant's id is the same 404 as
 * an unknown one.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import type { Hono } from "hono"
import { BatchConsumer, BatchFiles, BatchJobs, Cursor, Export, Failure, Import, ProjectionStore, Rebuild, Reconcile, type Registry, Sql } from "@factline/core"
import { Issues } from "@factline/schemas"
import { type AppEnv, bind, cursor, describe, Json, limitParameter, nextCursor, oneOf, type PageLimit, pageLimit, problems, raw } from "./Contract.js"
import { Forbidden, RequestRefused } from "./Problem.js"
import { isObject, readBody } from "./JsonBody.js"
import { type Ctx, type Run, runTenant } from "./Run.js"

export interface Deps {
  readonly registry: Registry.Shape
  readonly run: Run
}

const Job = Schema.Struct({
  batch_id: Schema.String,
  operation: Schema.Literals(["import", "export", "reconcile"]),
  status: Schema.Literals(["queued", "running", "succeeded", "failed", "cancelled"]),
  tenant_id: Schema.String,
  params: Json.annotate({ description: "What the job was started with" }),
  offset: Schema.Int.annotate({ description: "Items done" }),
  total: Schema.NullOr(Schema.Int),
  succeeded: Schema.Int,
  failed: Schema.Int,
  errors: Schema.Array(Schema.Struct({ line: Schema.Int, error: Schema.String })).annotate({ description: "The first failing items (an import's line numbers with the error)" }),
  error: Schema.NullOr(Schema.String),
  output: Schema.NullOr(Schema.String).annotate({ description: "An export's file, once it succeeded: GET this path" }),
  created_at: Schema.String,
  started_at: Schema.NullOr(Schema.String),
  finished_at: Schema.NullOr(Schema.String),
  updated_at: Schema.String
}).annotate({ identifier: "BatchJob", description: "An import, export or reconcile job and its progress" })

const RebuildJob = Schema.Struct({
  batch_id: Schema.String,
  id: Schema.String,
  operation: Schema.Literal("rebuild"),
  status: Schema.Literals(["running", "completed", "failed"]),
  tenant_id: Schema.String,
  projection: Schema.String,
  shadow_table: Schema.String,
  shards_total: Schema.Int,
  shards_done: Schema.Int,
  facts_replayed: Schema.Int,
  facts_failed: Schema.Int,
  first_failure: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  offset: Schema.Int,
  total: Schema.Int,
  succeeded: Schema.Int,
  failed: Schema.Int,
  created_at: Schema.String,
  started_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
}).annotate({ identifier: "RebuildJob", description: "A projection rebuild: replays every tenant's facts into a shadow table, then swaps it in" })

const Batch = Schema.Union([Job, RebuildJob])

/** Job statuses, and a rebuild's own (`completed` is a rebuild that succeeded). */
const statuses = [...BatchJobs.statuses, "completed"] as const

/** A page of batch jobs. */
const listLimit: PageLimit = { maximum: 100, default: 20 }

const id = { id: Schema.String.annotate({ description: "A batch id (`batch_id`)" }) }
const adminOrPlatform = ["admin", "platform"] as const

export const startBatch = HttpApiEndpoint.post("startBatch", "/v1/batches", {
  payload: Schema.Union([
    Schema.Struct({ operation: Schema.Literal("import"), events: Schema.Array(Json).check(Schema.isMinLength(1), Schema.isMaxLength(1_000)) }),
    Schema.Struct({ operation: Schema.Literal("import"), manifest: Schema.String.annotate({ description: "The name of a file uploaded with PUT /v1/uploads/:name" }) }),
    Schema.Struct({ operation: Schema.Literal("export"), projection: Schema.optional(Schema.String), format: Schema.optional(Schema.Literals(["ndjson", "csv"])) }),
    Schema.Struct({ operation: Schema.Literal("reconcile"), projection: Schema.String, repair: Schema.optional(Schema.Boolean) }),
    Schema.Struct({ operation: Schema.Literal("rebuild"), projection: Schema.String })
  ]),
  success: Batch.pipe(HttpApiSchema.status(202)),
  error: problems(400, 403, 404, 409, 413, 415, 503)
}).pipe(describe({
  summary: "Start a batch job",
  description: "`import`, `export` and `reconcile` work on the token's tenant (scope `admin`); `rebuild` replays every tenant's facts into a projection (scope `platform`). The job runs in chunks on the batch queue; poll GET /v1/batches/:id.",
  scopes: ["admin", "platform"],
  errors: {
    400: "`invalid_request` (naming the field), `too_many_events`",
    403: "`forbidden`: a rebuild without `platform`, or an import/export/reconcile without `admin`",
    404: "`not_found`: no such projection or uploaded file",
    409: "`conflict`: a rebuild of that projection is already running",
    413: "`payload_too_large`",
    415: "`unsupported_media_type`",
    503: "`unavailable`: a store or the batch queue; retry"
  }
}))

export const listBatches = HttpApiEndpoint.get("listBatches", "/v1/batches", {
  query: { status: oneOf(statuses, "A job's status, or `completed` for a rebuild that succeeded"), cursor, limit: limitParameter(listLimit) },
  success: Schema.Struct({ data: Schema.Array(Batch), next_cursor: nextCursor }),
  error: problems(400, 503)
}).pipe(describe({ summary: "List batch jobs", description: "The tenant's jobs and rebuilds, newest first.", scopes: adminOrPlatform, errors: { 400: "`invalid_query`", 503: "`unavailable`" } }))

export const getBatch = HttpApiEndpoint.get("getBatch", "/v1/batches/:id", {
  params: id,
  success: Batch,
  error: problems(404, 503)
}).pipe(describe({ summary: "Get a batch job", scopes: adminOrPlatform, errors: { 404: "`not_found`: no such job for this tenant", 503: "`unavailable`" } }))

export const cancelBatch = HttpApiEndpoint.post("cancelBatch", "/v1/batches/:id/cancel", {
  params: id,
  success: Job,
  error: problems(404, 409, 503)
}).pipe(describe({ summary: "Cancel a batch job", description: "Stops further chunks of a queued or running job.", scopes: adminOrPlatform, errors: { 404: "`not_found`", 409: "`conflict`: the job has ended, or it is a rebuild", 503: "`unavailable`" } }))

export const batchOutput = HttpApiEndpoint.get("batchOutput", "/v1/batches/:id/output", {
  params: id,
  success: [
    Schema.String.pipe(HttpApiSchema.asText({ contentType: "application/x-ndjson" })).annotate({ description: "The export's file as NDJSON, streamed" }),
    Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/csv" })).annotate({ description: "A projection exported as CSV, streamed" })
  ],
  error: problems(404, 409, 503)
}).pipe(describe({ summary: "Download an export", scopes: adminOrPlatform, errors: { 404: "`not_found`", 409: "`conflict`: the job has no output (yet)", 503: "`unavailable`" } }))

/** The one media type an upload is: what the description states and the route accepts. */
export const uploadContentType = "application/x-ndjson"

export const upload = HttpApiEndpoint.put("upload", "/v1/uploads/:name", {
  params: { name: Schema.String.check(Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/u)).annotate({ description: "A file name (never a path)" }) },
  payload: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: uploadContentType })).annotate({ description: "NDJSON: one envelope per line, at most 1 GiB, with a content-length" }),
  success: Schema.Struct({ manifest: Schema.String, size: Schema.Int }).pipe(HttpApiSchema.status(201)),
  error: problems(400, 411, 413, 415)
}).pipe(describe({
  summary: "Upload an import file",
  description: "Streamed to R2 under the token's tenant; then start it with `{ \"operation\": \"import\", \"manifest\": \"<name>\" }`.",
  scopes: ["admin"],
  errors: {
    400: "`invalid_request` (a bad name, an empty file) or `upload_failed`",
    411: "`length_required`",
    413: "`payload_too_large`: over 1 GiB",
    415: `\`unsupported_media_type\`: a content-type other than ${uploadContentType}`
  }
}))

export const group = HttpApiGroup.make("batches").add(startBatch, listBatches, getBatch, cancelBatch, batchOutput, upload)
  .annotateMerge(OpenApi.annotations({
    title: "Batch jobs",
    description: "Bulk import, export, reconcile and projection rebuilds, run in chunks on the batch queue."
  }))


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

export const mount = (app: Hono<AppEnv>, { registry, run }: Deps) => {
  /**
   * `POST /v1/batches`: starts a batch job. `rebuild` (scope `platform`: it replays every tenant's facts);
   * `import` (scope `admin`: into the caller's tenant) of up to 1,000 inline envelopes, written to R2 as
   * NDJSON under the tenant's prefix and run in chunks on `factline-batch`.
   */
  bind(app, startBatch, async (c, reply) => {
    const principal = c.get("principal")
    const body = await readBody(c)

    const usage = 'send { "operation": "rebuild", "projection": "<name>" }, { "operation": "import", "events": [...] | "manifest": "<uploaded name>" }, { "operation": "export", "projection"?: "<name>", "format"?: "ndjson" | "csv" } (reconcile is not supported yet)'
    if (!isObject(body)) throw new Failure.InvalidInput({ message: usage })
    if (body.operation === "rebuild") {
      if (!principal.scopes.includes("platform")) throw new Forbidden({ message: 'a rebuild replays every tenant\'s facts: it takes the "platform" scope' })
      if (typeof body.projection !== "string") throw new Failure.InvalidInput({ message: usage })
      return reply(await startRebuild(c, body.projection))
    }
    if (body.operation === "import" || body.operation === "export" || body.operation === "reconcile") {
      if (!principal.scopes.includes("admin")) throw new Forbidden({ message: `${body.operation} works on the token's tenant: it takes the "admin" scope` })
      return reply(await (body.operation === "import" ? startImport(c, body) : body.operation === "export" ? startExport(c, body) : startReconcile(c, body)))
    }
    throw new Failure.InvalidInput({ message: usage })
  })

  const startRebuild = async (c: Ctx, projection: string) => {
    const started = await run(c.env, Rebuild.start(projection, c.get("principal").tenantId))
    await run(c.env, BatchConsumer.send(started.first))
    return rebuildView(started.record)
  }

  /** Queues a created job's first chunk; a send that fails ends the job `failed` (it would never run). */
  const enqueueFirst = async (c: Ctx, job: BatchJobs.Row, total: number) => {
    const sent = await run(c.env, Effect.result(BatchConsumer.send({ batch_id: job.id, operation: job.operation, offset: 0, total }, job.tenant_id)))
    if (Result.isFailure(sent)) {
      await runTenant(run, c, BatchJobs.fail(job.id, "the batch queue was unavailable when the job was started", new Date().toISOString()))
      throw sent.failure
    }
    return BatchJobs.view(job)
  }

  const startReconcile = async (c: Ctx, body: Record<string, unknown>) => {
    const extra = Object.keys(body).filter((k) => !["operation", "projection", "repair"].includes(k))
    if (extra.length > 0) throw new Failure.InvalidInput({ message: `unknown field(s) ${extra.map((k) => JSON.stringify(k.slice(0, 50))).join(", ")}` })
    if (body.repair !== undefined && typeof body.repair !== "boolean") throw new Failure.InvalidInput({ message: '"repair" must be true or false' })
    if (typeof body.projection !== "string") throw new Failure.InvalidInput({ message: '"projection" must be a projection\'s name' })
    const projection = registry.projection(body.projection)
    if (!projection) throw new Failure.NotFound({ message: `no projection "${body.projection.slice(0, 100)}" (known: ${registry.projections.map((p) => p.name).join(", ")})` })
    const params: Reconcile.Params = { projection: projection.name, repair: body.repair === true }
    const created = await runTenant(run, c, BatchJobs.create({
      tenantId: c.get("principal").tenantId, operation: "reconcile", params, inputKey: null, total: null
    }))
    return enqueueFirst(c, created, 0)
  }

  const startExport = async (c: Ctx, body: Record<string, unknown>) => {
    const extra = Object.keys(body).filter((k) => !["operation", "projection", "format"].includes(k))
    if (extra.length > 0) throw new Failure.InvalidInput({ message: `unknown field(s) ${extra.map((k) => JSON.stringify(k.slice(0, 50))).join(", ")}` })
    const format = body.format ?? "ndjson"
    if (format !== "ndjson" && format !== "csv") throw new Failure.InvalidInput({ message: '"format" must be "ndjson" or "csv"' })
    if (body.projection !== undefined && typeof body.projection !== "string") throw new Failure.InvalidInput({ message: '"projection" must be a projection\'s name' })
    const projection = body.projection === undefined ? undefined : registry.projection(body.projection)
    if (body.projection !== undefined && !projection) {
      throw new Failure.NotFound({ message: `no projection "${String(body.projection).slice(0, 100)}" (known: ${registry.projections.map((p) => p.name).join(", ")})` })
    }
    if (projection === undefined && format === "csv") throw new Failure.InvalidInput({ message: "facts export as NDJSON only (their data is nested); CSV is for a projection" })
    const params: Export.Params = { ...(projection ? { projection: projection.name } : {}), format }
    const created = await runTenant(run, c, BatchJobs.create({
      tenantId: c.get("principal").tenantId, operation: "export", params, inputKey: null, total: null
    }))
    return enqueueFirst(c, created, 0)
  }

  const startManifestImport = async (c: Ctx, manifest: unknown) => {
    const tenantId = c.get("principal").tenantId
    if (typeof manifest !== "string" || !uploadName.test(manifest)) {
      throw new Failure.InvalidInput({ message: '"manifest" must be the name of a file uploaded with PUT /v1/uploads/:name' })
    }
    const key = uploadKey(tenantId, manifest)
    const exists = await run(c.env, Effect.flatMap(Effect.service(BatchFiles.BatchFiles), (files) => files.exists(key)))
    if (!exists) throw new Failure.NotFound({ message: `no uploaded file "${manifest}"; upload it with PUT /v1/uploads/${manifest}` })
    const created = await runTenant(run, c, BatchJobs.create({
      tenantId, operation: "import", params: { source: "manifest", manifest }, inputKey: key, total: null
    }))
    return enqueueFirst(c, created, 0)
  }

  const startImport = async (c: Ctx, body: Record<string, unknown>) => {
    const tenantId = c.get("principal").tenantId
    const events = body.events
    const extra = Object.keys(body).filter((k) => k !== "operation" && k !== "events" && k !== "manifest")
    if (extra.length > 0 || ("events" in body && "manifest" in body)) {
      throw new Failure.InvalidInput({ message: `send { "operation": "import", "events": [...] } or { "operation": "import", "manifest": "<uploaded name>" }${extra.length > 0 ? `; unknown field(s) ${extra.map((k) => JSON.stringify(k.slice(0, 50))).join(", ")}` : ""}` })
    }
    if ("manifest" in body) return startManifestImport(c, body.manifest)
    if (!Array.isArray(events) || events.length === 0) throw new Failure.InvalidInput({ message: '"events" must be a non-empty array of envelopes' })
    if (events.length > Import.maxInlineEvents) {
      throw new Failure.InvalidInput({ code: "too_many_events", message: `at most ${Import.maxInlineEvents} events per inline import; got ${events.length}` })
    }
    // One line per event, whatever it is: lines that are not envelopes are reported by the job with their number.
    const ndjson = events.map((event) => JSON.stringify(event)).join("\n") + "\n"
    const created = await runTenant(run, c, Effect.gen(function*() {
      const id = yield* BatchJobs.newId
      const key = BatchJobs.inputKey(tenantId, id)
      const files = yield* BatchFiles.BatchFiles
      yield* files.put(key, ndjson)
      return yield* BatchJobs.create({ id, tenantId, operation: "import", params: { source: "inline" }, inputKey: key, total: events.length })
    }))
    return enqueueFirst(c, created, events.length)
  }

  bind(app, listBatches, async (c, reply) => {
    const problems: Array<{ path: string; message: string }> = []
    // One of `statuses` when given: checked against the description before the handler runs.
    const status = c.req.query("status")
    const limit = pageLimit(c.req.query("limit"), listLimit)
    const rawCursor = c.req.query("cursor")
    const cursor = rawCursor === undefined ? undefined : decodeCursor(rawCursor)
    if (rawCursor !== undefined && cursor === undefined) problems.push({ path: "cursor", message: "malformed cursor; use next_cursor from a previous page" })
    if (problems.length > 0) throw new Failure.InvalidInput({ code: "invalid_query", message: Issues.render(problems), problems: problems })

    const tenantId = c.get("principal").tenantId
    // Each table gives at most limit + 1 rows past the cursor; merged newest first, the page is exact.
    const page = (table: string, at: string) => {
      const clauses = ["tenant_id = ?", ...(status !== undefined ? ["status = ?"] : []), ...(cursor ? [`(${at}, id) < (?, ?)`] : [])]
      return {
        sql: `SELECT * FROM ${table} WHERE ${clauses.join(" AND ")} ORDER BY ${at} DESC, id DESC LIMIT ?`,
        params: [tenantId, ...(status !== undefined ? [status] : []), ...(cursor ?? []), limit + 1]
      }
    }
    // Rebuild records are the platform database's; batch jobs the tenant's read database's.
    const result = await runTenant(run, c, Effect.all([
      Effect.flatMap(Effect.service(Sql.PlatformDatabase), (sql) => {
        const { sql: text, params } = page("projection_rebuilds", "started_at")
        return sql.all<Rebuild.RebuildRecord>(Sql.statement(text, ...params))
      }),
      Effect.flatMap(Effect.service(ProjectionStore.ProjectionStore), (store) => store.query<BatchJobs.Row>(page("batch_jobs", "created_at")))
    ]))
    const [rebuilds, jobs] = result
    const rows = [...rebuilds.map(rebuildView), ...jobs.map(BatchJobs.view)]
      .sort((a, b) => (a.created_at === b.created_at ? (a.batch_id < b.batch_id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1))
    const data = rows.slice(0, limit)
    const last = data.at(-1)
    return reply({ data, next_cursor: rows.length > limit && last ? encodeCursor(last.created_at, last.batch_id) : null })
  })

  // Only the tenant that started a batch reads it; another tenant's id is the same 404 as a missing one.
  bind(app, getBatch, async (c, reply) => {
    const tenantId = c.get("principal").tenantId
    const id = c.req.param("id")!
    const [job, rebuild] = await runTenant(run, c, Effect.all([BatchJobs.get(tenantId, id), Rebuild.get(tenantId, id)]))
    if (job) return reply(BatchJobs.view(job))
    if (rebuild) return reply(rebuildView(rebuild))
    throw new Failure.NotFound({ message: `no batch "${id}"` })
  })

  bind(app, cancelBatch, async (c, reply) => {
    const tenantId = c.get("principal").tenantId
    const id = c.req.param("id")!
    // A rebuild's id is no batch job's: its NotFound becomes the Conflict that says why.
    const cancelled = await runTenant(run, c, BatchJobs.cancel(tenantId, id, new Date().toISOString()).pipe(
      Effect.catchIf((error) => error instanceof Failure.NotFound, (notFound) =>
        Effect.flatMap(Rebuild.get(tenantId, id), (rebuild) =>
          Effect.fail(rebuild ? new Failure.Conflict({ message: "a rebuild cannot be cancelled; it ends when every shard is replayed" }) : notFound)))
    ))
    return reply(BatchJobs.view(cancelled))
  })

  bind(app, batchOutput, async (c) => {
    const tenantId = c.get("principal").tenantId
    const id = c.req.param("id")!
    const job = await runTenant(run, c, BatchJobs.get(tenantId, id))
    if (!job) throw new Failure.NotFound({ message: `no batch "${id}"` })
    if (job.output_key === null || job.status !== "succeeded") {
      throw new Failure.Conflict({ message: `batch ${id} has no output${job.status === "succeeded" ? "" : ` (it is ${job.status})`}` })
    }
    // The job's own prefix under its own tenant: never built from the request.
    const prefix = Export.outputPrefix(job.tenant_id, job.id)
    const files = Effect.service(BatchFiles.BatchFiles)
    const listed = await run(c.env, Effect.flatMap(files, (f) => f.keys(prefix)))
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>()
    const pipe = async () => {
      for (const key of listed) {
        const body = await run(c.env, Effect.flatMap(files, (f) => f.stream(key)))
        if (body === undefined) throw new Error(`output part ${key} is missing`)
        await body.pipeTo(writable, { preventClose: true })
      }
      await writable.close()
    }
    c.executionCtx.waitUntil(pipe().catch((error) => writable.abort(error)))
    const format = (JSON.parse(job.params) as Export.Params).format
    return raw(new Response(readable, {
      headers: {
        "content-type": format === "csv" ? "text/csv; charset=utf-8" : "application/x-ndjson",
        "content-disposition": `attachment; filename="${job.id}.${format}"`,
        "cache-control": "no-store"
      }
    }))
  })
}

/** A chunk message onto the batch queue, through the one queue door. */

/** Upload names: a file name, never a path (the tenant prefix is the platform's, never the caller's). */
export const uploadName = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/
export const maxUploadBytes = 1024 * 1024 * 1024
export const uploadKey = (tenantId: string, name: string) => `${tenantId}/uploads/${name}`

export const mountUploads = (app: Hono<AppEnv>, { run }: { readonly run: Run }) => {
  bind(app, upload, async (c, reply) => {
    const name = c.req.param("name")!
    if (!uploadName.test(name)) throw new Failure.InvalidInput({ message: "the name must be 1–128 letters, digits, '.', '_' or '-', starting with a letter or digit" })
    const contentType = c.req.header("content-type")
    if (contentType?.split(";")[0]!.trim().toLowerCase() !== uploadContentType) {
      throw new RequestRefused({ status: 415, message: `an upload is NDJSON: send it with content-type: ${uploadContentType}${contentType === undefined ? "" : ` (got ${JSON.stringify(contentType.slice(0, 100))})`}` })
    }
    const rawLength = c.req.header("content-length")
    if (rawLength === undefined || !/^\d+$/.test(rawLength)) throw new RequestRefused({ status: 411, message: "send the file with a content-length header" })
    const length = Number(rawLength)
    if (length > maxUploadBytes) throw new RequestRefused({ status: 413, message: `an upload is at most ${maxUploadBytes} bytes (1 GiB); got ${length}` })
    const body = c.req.raw.body
    if (body === null || length === 0) throw new Failure.InvalidInput({ message: "the file is empty" })
    const key = uploadKey(c.get("principal").tenantId, name)
    // Streamed: R2 takes the body with its declared length, never buffered here.
    const stored = await run(c.env, Effect.result(Effect.flatMap(Effect.service(BatchFiles.BatchFiles), (files) => files.upload(key, body.pipeThrough(new FixedLengthStream(length)), length))))
    if (Result.isSuccess(stored)) return reply({ manifest: name, size: stored.success })
    console.error("upload failed: the payload store is unavailable or the body did not match its content-length")
    throw new Failure.InvalidInput({ code: "upload_failed", message: "the upload did not complete (the body must match its content-length); send it again" })
  })
}
