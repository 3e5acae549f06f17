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
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { cursor, describe, Json, limitParameter, nextCursor, oneOf, type PageLimit, problems, text } from "./Contract.js"
import { Edge } from "./Edge.js"
/** A job's status (the runtime, core's `BatchJobs`, reads them from here). */
export const jobStatuses = ["queued", "running", "succeeded", "failed", "cancelled"] as const

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
const statuses = [...jobStatuses, "completed"] as const

/** A page of batch jobs. */
export const listLimit: PageLimit = { maximum: 100, default: 20 }

const id = { id: Schema.String.annotate({ description: "A batch id (`batch_id`)" }) }
const adminOrPlatform = ["admin", "platform"] as const

/** The usage of `POST /v1/batches`: what a refused body's message starts with. */
export const startUsage = 'send { "operation": "rebuild", "projection": "<name>" }, { "operation": "import", "events": [...] | "manifest": "<uploaded name>" }, { "operation": "export", "projection"?: "<name>", "format"?: "ndjson" | "csv" } or { "operation": "reconcile", "projection": "<name>", "repair"?: true | false }'

export const StartPayload = Schema.Union([
  Schema.Struct({
    operation: Schema.Literal("import"),
    // Any JSON per line: a line that is not a valid envelope is reported by its number in the job's `errors`, not
    // refused; more than 1,000 is BatchStart's 400 `too_many_events`.
    events: Schema.Array(Schema.Unknown).check(Schema.isMinLength(1)).annotate({ description: "1 to 1,000 envelopes; an invalid one is reported by its line number in the job's `errors` (more than 1,000: `too_many_events`)" })
  }),
  Schema.Struct({ operation: Schema.Literal("import"), manifest: Schema.String.annotate({ description: "The name of a file uploaded with PUT /v1/uploads/:name" }) }),
  Schema.Struct({ operation: Schema.Literal("export"), projection: Schema.optional(Schema.String), format: Schema.optional(Schema.Literals(["ndjson", "csv"])) }),
  Schema.Struct({ operation: Schema.Literal("reconcile"), projection: Schema.String, repair: Schema.optional(Schema.Boolean) }),
  Schema.Struct({ operation: Schema.Literal("rebuild"), projection: Schema.String })
])

export const startBatch = HttpApiEndpoint.post("startBatch", "/v1/batches", {
  payload: StartPayload,
  success: Batch.pipe(HttpApiSchema.status(202)),
  error: problems(400, 403, 404, 409, 413, 415, 503)
}).pipe(describe({
  summary: "Start a batch job",
  description: "`import`, `export` and `reconcile` work on the token's tenant (scope `admin`); `rebuild` replays every tenant's facts into a projection (scope `platform`). The job runs in chunks on the batch queue; poll GET /v1/batches/:id.",
  scopes: ["admin", "platform"],
  usage: startUsage,
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
}).pipe(describe({ summary: "Download an export", scopes: adminOrPlatform, errors: { 404: "`not_found`", 409: "`conflict`: the job has no output (yet), or its file was removed by an erasure of a data subject it held (the message names the erasure: export again)", 503: "`unavailable`" } }))

/** The one media type an upload is: what the description states and the route accepts. */
export const uploadContentType = "application/x-ndjson"

export const upload = HttpApiEndpoint.put("upload", "/v1/uploads/:name", {
  params: { name: Schema.String.check(Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/u, { message: "must be 1–128 letters, digits, '.', '_' or '-', starting with a letter or digit" })).annotate({ description: "A file name (never a path)" }) },
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

export const group = HttpApiGroup.make("batches").add(startBatch, listBatches, getBatch, cancelBatch, batchOutput, upload).middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Batch jobs",
    description: "Bulk import, export, reconcile and projection rebuilds, run in chunks on the batch queue."
  }))
