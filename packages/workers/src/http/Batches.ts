/**
 * The handlers of the Batches routes, implemented against their description (`@factline/core/api`'s `Batches`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Result from "effect/Result"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import { Failure } from "@factline/core"
import { Batches, BatchJobs, BatchStart } from "@factline/core/runtime"
import { Issues } from "@factline/schemas"
import { apiOf, Caller, RequestBody } from "./Edge.js"
import { Forbidden, RequestRefused } from "./Problem.js"
import { Contract, Batches as Description } from "@factline/core/api"

const decodeStart = Issues.decodeStrict(Description.StartPayload)



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
    if (contentType?.split(";")[0]!.trim().toLowerCase() !== Description.uploadContentType) {
      return yield* new RequestRefused({ status: 415, message: `an upload is NDJSON: send it with content-type: ${Description.uploadContentType}${contentType === undefined ? "" : ` (got ${JSON.stringify(contentType.slice(0, 100))})`}` })
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

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "batches", (handlers) =>
  handlers
    /**
     * Starts a batch job (core's BatchStart): `rebuild` (scope `platform`: it replays every tenant's facts);
     * `import` (inline envelopes or an uploaded file), `export` and `reconcile` (scope `admin`: the caller's tenant).
     */
    // Raw (its body read by the edge within the JSON limits): the scope an operation takes is checked before the body's
    // fields, as the description cannot say per payload variant; then the body is decoded strictly by its schema.
    .handleRaw("startBatch", () =>
      Effect.gen(function*() {
        const caller = yield* Caller
        const body = yield* RequestBody
        const operation = Predicate.hasProperty(body, "operation") ? body.operation : undefined
        if (operation === "rebuild" && !caller.scopes.includes("platform")) return yield* new Forbidden({ message: 'a rebuild replays every tenant\'s facts: it takes the "platform" scope' })
        if ((operation === "import" || operation === "export" || operation === "reconcile") && !caller.scopes.includes("admin")) {
          return yield* new Forbidden({ message: `${operation} works on the token's tenant: it takes the "admin" scope` })
        }
        const decoded = decodeStart(body)
        if (Result.isFailure(decoded)) return yield* new Failure.InvalidInput({ message: `${Description.startUsage}: ${Issues.render(decoded.failure)}`, problems: decoded.failure })
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
      Effect.flatMap(tenant, (tenantId) => Batches.list(tenantId, { status, cursor, limit: Contract.pageLimit(limit, Description.listLimit) })))
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
