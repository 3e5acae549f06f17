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
import { Batches, BatchJobs, BatchStart, Failure, type Registry } from "@factline/core"
import { type AppEnv, bind, cursor, describe, Json, limitParameter, nextCursor, oneOf, type PageLimit, pageLimit, problems, raw } from "./Contract.js"
import { Forbidden, RequestRefused } from "./Problem.js"
import { isObject, readBody } from "./JsonBody.js"
import type { Run } from "./Run.js"

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


export const mount = (app: Hono<AppEnv>, { run }: Deps) => {
  /**
   * `POST /v1/batches`: starts a batch job (core's BatchStart). `rebuild` (scope `platform`: it replays every
   * tenant's facts); `import` (inline envelopes or an uploaded file), `export` and `reconcile` (scope `admin`:
   * the caller's tenant).
   */
  bind(app, startBatch, async (c, reply) => {
    const principal = c.get("principal")
    const tenantId = principal.tenantId
    const body = await readBody(c)
    const usage = 'send { "operation": "rebuild", "projection": "<name>" }, { "operation": "import", "events": [...] | "manifest": "<uploaded name>" }, { "operation": "export", "projection"?: "<name>", "format"?: "ndjson" | "csv" } or { "operation": "reconcile", "projection": "<name>", "repair"?: true | false }'
    if (!isObject(body)) throw new Failure.InvalidInput({ message: usage })
    if (body.operation === "rebuild") {
      if (!principal.scopes.includes("platform")) throw new Forbidden({ message: 'a rebuild replays every tenant\'s facts: it takes the "platform" scope' })
      if (typeof body.projection !== "string") throw new Failure.InvalidInput({ message: usage })
      return reply(Batches.rebuildView(await run(c.env, BatchStart.rebuild(body.projection, tenantId))))
    }
    if (body.operation !== "import" && body.operation !== "export" && body.operation !== "reconcile") throw new Failure.InvalidInput({ message: usage })
    if (!principal.scopes.includes("admin")) throw new Forbidden({ message: `${body.operation} works on the token's tenant: it takes the "admin" scope` })
    return reply(BatchJobs.view(await run(c.env, startJob(tenantId, body))))
  })

  bind(app, listBatches, async (c, reply) => {
    // `status`, when given, is one of `statuses`: checked against the description before the handler runs.
    const options = { status: c.req.query("status"), cursor: c.req.query("cursor"), limit: pageLimit(c.req.query("limit"), listLimit) }
    return reply(await run(c.env, Batches.list(c.get("principal").tenantId, options)))
  })

  // Only the tenant that started a batch reads it; another tenant's id is the same 404 as a missing one.
  bind(app, getBatch, async (c, reply) => reply(await run(c.env, Batches.get(c.get("principal").tenantId, c.req.param("id")!))))

  bind(app, cancelBatch, async (c, reply) => reply(await run(c.env, Batches.cancel(c.get("principal").tenantId, c.req.param("id")!))))

  bind(app, batchOutput, async (c) => {
    const output = await run(c.env, Batches.output(c.get("principal").tenantId, c.req.param("id")!))
    return raw(new Response(output.body, {
      headers: {
        "content-type": output.format === "csv" ? "text/csv; charset=utf-8" : "application/x-ndjson",
        "content-disposition": `attachment; filename="${output.fileName}"`,
        "cache-control": "no-store"
      }
    }))
  })
}

/** An import, export or reconcile of the tenant's, from the request's fields (each checked here, as the description states them). */
const startJob = (tenantId: string, body: Record<string, unknown>) => {
  const allowed = body.operation === "import" ? ["operation", "events", "manifest"] : body.operation === "export" ? ["operation", "projection", "format"] : ["operation", "projection", "repair"]
  const extra = Object.keys(body).filter((k) => !allowed.includes(k))
  const unknown = extra.length > 0 ? `unknown field(s) ${extra.map((k) => JSON.stringify(k.slice(0, 50))).join(", ")}` : undefined
  if (body.operation === "import") {
    if (unknown !== undefined || ("events" in body && "manifest" in body)) {
      throw new Failure.InvalidInput({ message: `send { "operation": "import", "events": [...] } or { "operation": "import", "manifest": "<uploaded name>" }${unknown === undefined ? "" : `; ${unknown}`}` })
    }
    if ("manifest" in body) {
      if (typeof body.manifest !== "string") throw new Failure.InvalidInput({ message: '"manifest" must be the name of a file uploaded with PUT /v1/uploads/:name' })
      return BatchStart.importUpload(tenantId, body.manifest)
    }
    if (!Array.isArray(body.events)) throw new Failure.InvalidInput({ message: '"events" must be a non-empty array of envelopes' })
    return BatchStart.importEvents(tenantId, body.events)
  }
  if (unknown !== undefined) throw new Failure.InvalidInput({ message: unknown })
  if (body.projection !== undefined && typeof body.projection !== "string") throw new Failure.InvalidInput({ message: '"projection" must be a projection\'s name' })
  if (body.operation === "export") {
    if (body.format !== undefined && body.format !== "ndjson" && body.format !== "csv") throw new Failure.InvalidInput({ message: '"format" must be "ndjson" or "csv"' })
    return BatchStart.exportData(tenantId, { projection: body.projection, format: body.format })
  }
  if (body.repair !== undefined && typeof body.repair !== "boolean") throw new Failure.InvalidInput({ message: '"repair" must be true or false' })
  if (typeof body.projection !== "string") throw new Failure.InvalidInput({ message: '"projection" must be a projection\'s name' })
  return BatchStart.reconcile(tenantId, { projection: body.projection, repair: body.repair })
}

/** Upload names: a file name, never a path (the tenant prefix is the platform's, never the caller's). */
export const uploadName = BatchStart.uploadName
export const maxUploadBytes = 1024 * 1024 * 1024

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
    // Streamed: R2 takes the body with its declared length, never buffered here.
    const stored = await run(c.env, Effect.result(Batches.upload(c.get("principal").tenantId, name, body.pipeThrough(new FixedLengthStream(length)), length)))
    if (Result.isSuccess(stored)) return reply({ manifest: name, size: stored.success })
    console.error("upload failed: the payload store is unavailable or the body did not match its content-length")
    throw new Failure.InvalidInput({ code: "upload_failed", message: "the upload did not complete (the body must match its content-length); send it again" })
  })
}
