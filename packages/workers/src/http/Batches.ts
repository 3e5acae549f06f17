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
import * as Predicate from "effect/Predicate"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import { Failure } from "@factline/core"
import { Batches, BatchJobs, BatchStart } from "@factline/core/runtime"
import { Issues } from "@factline/schemas"
import { cursor, describe, Json, limitParameter, nextCursor, oneOf, type PageLimit, pageLimit, problems } from "./Contract.js"
import { apiOf, Caller, Edge } from "./Edge.js"
import { Forbidden, RequestRefused } from "./Problem.js"

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

/** The usage of `POST /v1/batches`: what a refused body's message starts with. */
const startUsage = 'send { "operation": "rebuild", "projection": "<name>" }, { "operation": "import", "events": [...] | "manifest": "<uploaded name>" }, { "operation": "export", "projection"?: "<name>", "format"?: "ndjson" | "csv" } or { "operation": "reconcile", "projection": "<name>", "repair"?: true | false }'

const StartPayload = Schema.Union([
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
const decodeStart = Issues.decodeStrict(StartPayload)

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
}).pipe(describe({ summary: "Download an export", scopes: adminOrPlatform, errors: { 404: "`not_found`", 409: "`conflict`: the job has no output (yet)", 503: "`unavailable`" } }))

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



/** Upload names: a file name, never a path (the tenant prefix is the platform's, never the caller's). */
export const uploadName = BatchStart.uploadName
export const maxUploadBytes = 1024 * 1024 * 1024

/**
 * `PUT /v1/uploads/:name` stays a raw handler of its endpoint (`handleRaw`: its name decoded by the path schema, the
 * body not decoded): the file is streamed to R2 with its declared length, at most 1 GiB — never buffered, which
 * decoding the `Uint8Array` payload would do — so its media type, length and limit are checked here.
 */
const receiveUpload = (tenantId: string, name: string, request: Request) =>
  Effect.gen(function*() {
    const contentType = request.headers.get("content-type") ?? undefined
    if (contentType?.split(";")[0]!.trim().toLowerCase() !== uploadContentType) {
      return yield* new RequestRefused({ status: 415, message: `an upload is NDJSON: send it with content-type: ${uploadContentType}${contentType === undefined ? "" : ` (got ${JSON.stringify(contentType.slice(0, 100))})`}` })
    }
    const rawLength = request.headers.get("content-length")
    if (rawLength === null || !/^\d+$/.test(rawLength)) return yield* new RequestRefused({ status: 411, message: "send the file with a content-length header" })
    const length = Number(rawLength)
    if (length > maxUploadBytes) return yield* new RequestRefused({ status: 413, message: `an upload is at most ${maxUploadBytes} bytes (1 GiB); got ${length}` })
    if (request.body === null || length === 0) return yield* new Failure.InvalidInput({ message: "the file is empty" })
    const stored = yield* Effect.result(Batches.upload(tenantId, name, request.body.pipeThrough(new FixedLengthStream(length)), length))
    if (Result.isSuccess(stored)) return { manifest: name, size: stored.success }
    console.error("upload failed: the payload store is unavailable or the body did not match its content-length")
    return yield* new Failure.InvalidInput({ code: "upload_failed", message: "the upload did not complete (the body must match its content-length); send it again" })
  })

const tenant = Effect.map(Caller, (caller) => caller.tenantId)

export const handlers = HttpApiBuilder.group(apiOf(group), "batches", (handlers) =>
  handlers
    /**
     * Starts a batch job (core's BatchStart): `rebuild` (scope `platform`: it replays every tenant's facts);
     * `import` (inline envelopes or an uploaded file), `export` and `reconcile` (scope `admin`: the caller's tenant).
     */
    // Raw (its body read by the edge within the JSON limits): the scope an operation takes is checked before the body's
    // fields, as the description cannot say per payload variant; then the body is decoded strictly by its schema.
    .handleRaw("startBatch", ({ request }) =>
      Effect.gen(function*() {
        const caller = yield* Caller
        const body: unknown = yield* Effect.orDie(request.json)
        const operation = Predicate.hasProperty(body, "operation") ? body.operation : undefined
        if (operation === "rebuild" && !caller.scopes.includes("platform")) return yield* new Forbidden({ message: 'a rebuild replays every tenant\'s facts: it takes the "platform" scope' })
        if ((operation === "import" || operation === "export" || operation === "reconcile") && !caller.scopes.includes("admin")) {
          return yield* new Forbidden({ message: `${operation} works on the token's tenant: it takes the "admin" scope` })
        }
        const decoded = decodeStart(body)
        if (Result.isFailure(decoded)) return yield* new Failure.InvalidInput({ message: `${startUsage}: ${Issues.render(decoded.failure)}`, problems: decoded.failure })
        const payload = decoded.success
        if (payload.operation === "rebuild") return Batches.rebuildView(yield* BatchStart.rebuild(payload.projection, caller.tenantId))
        const job = payload.operation === "import"
          ? "manifest" in payload ? BatchStart.importUpload(caller.tenantId, payload.manifest) : BatchStart.importEvents(caller.tenantId, payload.events)
          : payload.operation === "export"
          ? BatchStart.exportData(caller.tenantId, { projection: payload.projection, format: payload.format })
          : BatchStart.reconcile(caller.tenantId, { projection: payload.projection, repair: payload.repair })
        return BatchJobs.view(yield* job)
      }))
    .handle("listBatches", ({ query: { status, cursor, limit } }) =>
      Effect.flatMap(tenant, (tenantId) => Batches.list(tenantId, { status, cursor, limit: pageLimit(limit, listLimit) })))
    // Only the tenant that started a batch reads it; another tenant's id is the same 404 as a missing one.
    .handle("getBatch", ({ params }) => Effect.flatMap(tenant, (tenantId) => Batches.get(tenantId, params.id)))
    .handle("cancelBatch", ({ params }) => Effect.flatMap(tenant, (tenantId) => Batches.cancel(tenantId, params.id)))
    // Streamed from R2 part by part: the response's body is the output's stream.
    .handle("batchOutput", ({ params }) =>
      Effect.map(Effect.flatMap(tenant, (tenantId) => Batches.output(tenantId, params.id)), (output) =>
        HttpServerResponse.raw(output.body, {
          headers: {
            "content-type": output.format === "csv" ? "text/csv; charset=utf-8" : "application/x-ndjson",
            "content-disposition": `attachment; filename="${output.fileName}"`
          }
        })))
    .handleRaw("upload", ({ params, request }) => Effect.flatMap(tenant, (tenantId) => receiveUpload(tenantId, params.name, request.source as Request))))
