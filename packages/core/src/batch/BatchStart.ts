/**
 * Starting a batch operation — a tenant's import, export or reconcile, a projection rebuild, a tenant's move or
 * deletion: the one use case behind `POST /v1/batches`, `POST /v1/tenants/:tenant/moves`, `DELETE /v1/tenants/:tenant`
 * and a projection's catch-up.
 * Each records its operation (a `batch_jobs` row, a rebuild record, a move) and sends its first chunk to the
 * batch queue. When the queue refuses, the operation ends `failed` by the policy of a chunk that ran out of
 * retries (`BatchConsumer.fail`: a move releases the tenant's writes, a rebuild drops its shadow tables) and
 * the queue's failure is returned: nothing is left queued or running that no message would ever run.
 *
 * It checks what depends on the registry and the stores (a projection's name, an uploaded file); scopes and
 * the shape of a request are the HTTP edge's.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { BatchPayload } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import * as Placement from "../placement/Placement.js"
import * as Move from "../placement/Move.js"
import * as Deletion from "../placement/Deletion.js"
import * as Reshard from "../placement/Reshard.js"
import * as Erasure from "../subjects/Erasure.js"
import * as Rebuild from "../projections/Rebuild.js"
import { Registry } from "../registry/Registry.js"
import * as BatchConsumer from "./BatchConsumer.js"
import { BatchFiles } from "./BatchFiles.js"
import * as BatchJobs from "./BatchJobs.js"
import * as Export from "./Export.js"
import * as Import from "./Import.js"
import type * as Reconcile from "./Reconcile.js"

/**
 * Sends a recorded operation's first chunk (a job's under its tenant, a rebuild's and a move's under the
 * platform's); when the queue refuses, ends the operation `failed` and fails with the queue's failure.
 */
export const enqueueFirst = Effect.fn("BatchStart.enqueueFirst")(function*(first: BatchPayload, tenantId: string = Rebuild.platformTenant) {
  const sent = yield* Effect.result(BatchConsumer.send(first, tenantId))
  if (Result.isSuccess(sent)) return
  yield* BatchConsumer.fail(first, tenantId, `the batch queue was unavailable when the ${first.operation} was started: ${sent.failure.message}`)
  return yield* sent.failure
})

/** Records a queued job of the tenant's (on its read database) and sends its first chunk; the job's row. */
const job = Effect.fn("BatchStart.job")(function*(created: Parameters<typeof BatchJobs.create>[0]) {
  const row = yield* Placement.writing(created.tenantId)(BatchJobs.create(created))
  yield* enqueueFirst({ batch_id: row.id, operation: row.operation, offset: 0, total: created.total ?? 0 }, row.tenant_id)
  return row
})

/** The registered projection of that name, or NotFound naming the known ones. */
const projectionNamed = Effect.fn("BatchStart.projectionNamed")(function*(name: string) {
  const registry = yield* Registry
  const projection = registry.projection(name)
  if (projection) return projection
  return yield* new Failure.NotFound({ message: `no projection "${name.slice(0, 100)}" (known: ${registry.projections.map((p) => p.name).join(", ")})` })
})

/** Imports up to `Import.maxInlineEvents` envelopes into the tenant: written to R2 as NDJSON (one line each, whatever it is), then run in chunks. */
export const importEvents = Effect.fn("BatchStart.importEvents")(function*(tenantId: string, events: ReadonlyArray<unknown>) {
  if (events.length === 0) return yield* new Failure.InvalidInput({ message: '"events" must be a non-empty array of envelopes' })
  if (events.length > Import.maxInlineEvents) {
    return yield* new Failure.InvalidInput({ code: "too_many_events", message: `at most ${Import.maxInlineEvents} events per inline import; got ${events.length}` })
  }
  // Lines that are not envelopes are reported by the job with their number.
  const ndjson = events.map((event) => JSON.stringify(event)).join("\n") + "\n"
  const id = yield* BatchJobs.newId
  const key = BatchJobs.inputKey(tenantId, id)
  // Under the tenant's write scope: a tenant whose writes a move holds gets no input file either.
  yield* Placement.writing(tenantId)(Effect.flatMap(Effect.service(BatchFiles), (files) => files.put(key, ndjson)))
  return yield* job({ id, tenantId, operation: "import", params: { source: "inline" }, inputKey: key, total: events.length })
})

/** Upload names: a file name, never a path (the tenant prefix is the platform's, never the caller's). */
export const uploadName = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/
/** Where an upload of the tenant's is kept in R2. */
export const uploadKey = (tenantId: string, name: string) => `${tenantId}/uploads/${name}`

/** Imports a file the tenant uploaded (`PUT /v1/uploads/:name`), read by byte range as the job runs. */
export const importUpload = Effect.fn("BatchStart.importUpload")(function*(tenantId: string, manifest: string) {
  if (!uploadName.test(manifest)) return yield* new Failure.InvalidInput({ message: '"manifest" must be the name of a file uploaded with PUT /v1/uploads/:name' })
  const key = uploadKey(tenantId, manifest)
  if (!(yield* (yield* BatchFiles).exists(key))) return yield* new Failure.NotFound({ message: `no uploaded file "${manifest}"; upload it with PUT /v1/uploads/${manifest}` })
  return yield* job({ tenantId, operation: "import", params: { source: "manifest", manifest }, inputKey: key, total: null })
})

/** Exports the tenant's facts (NDJSON) or one projection's rows (NDJSON or CSV) to R2, part by part. */
export const exportData = Effect.fn("BatchStart.exportData")(function*(tenantId: string, options: { readonly projection?: string | undefined; readonly format?: Export.Format | undefined }) {
  const format = options.format ?? "ndjson"
  const projection = options.projection === undefined ? undefined : yield* projectionNamed(options.projection)
  if (projection === undefined && format === "csv") return yield* new Failure.InvalidInput({ message: "facts export as NDJSON only (their data is nested); CSV is for a projection" })
  const params: Export.Params = { ...(projection ? { projection: projection.name } : {}), format }
  return yield* job({ tenantId, operation: "export", params, inputKey: null, total: null })
})

/** Compares a projection's rows with a replay of the tenant's facts, repairing them when asked. */
export const reconcile = Effect.fn("BatchStart.reconcile")(function*(tenantId: string, options: { readonly projection: string; readonly repair?: boolean | undefined }) {
  const projection = yield* projectionNamed(options.projection)
  // Its shadow lives beside the projection: a projection in parts has no one such database (rebuild it instead).
  if ((yield* Placement.of(tenantId)).projections[projection.name]?.parts) {
    return yield* new Failure.Conflict({ message: `projection ${projection.name} of tenant ${tenantId} is in parts (docs/placement.md): a reconcile is not run across parts; rebuild the projection instead` })
  }
  const params: Reconcile.Params = { projection: projection.name, repair: options.repair === true }
  return yield* job({ tenantId, operation: "reconcile", params, inputKey: null, total: null })
})

/** Rebuilds a projection from every tenant's facts (Rebuild.ts); the record is `tenantId`'s to read. */
export const rebuild = Effect.fn("BatchStart.rebuild")(function*(projection: string, tenantId: string, startedBy: "operator" | "system" = "operator") {
  const { first, record } = yield* Rebuild.start(projection, tenantId, startedBy)
  yield* enqueueFirst(first)
  return record
})

/** Moves a tenant (or one projection, or splits it into `parts`) to another read database under live traffic (Move.ts, Split.ts); a move that never runs holds none of its writes. */
export const move = Effect.fn("BatchStart.move")(function*(tenantId: string, toDatabase: number | undefined, startedBy: string, projection?: string, parts?: ReadonlyArray<number>) {
  const { first, record } = yield* Move.start(tenantId, toDatabase, startedBy, projection, parts)
  yield* enqueueFirst(first)
  return record
})

/**
 * Raises a tenant's ledger shard count under live traffic (Reshard.ts). Answers the running reshard to the same
 * count without starting another; resumes a failed one.
 */
export const reshard = Effect.fn("BatchStart.reshard")(function*(tenantId: string, shards: number, startedBy: string) {
  const { first, record } = yield* Reshard.start(tenantId, shards, startedBy)
  if (first === undefined) return record
  yield* enqueueFirst(first)
  return (yield* Reshard.find(record.id)) ?? record
})

/**
 * Deletes a departed tenant's whole data (Deletion.ts). Answers the running deletion, or the finished one when
 * nothing of the tenant came back, without starting another.
 */
export const deleteTenant = Effect.fn("BatchStart.deleteTenant")(function*(tenantId: string, startedBy: string) {
  const { first, record } = yield* Deletion.start(tenantId, startedBy)
  if (first === undefined) return record
  yield* enqueueFirst(first)
  return (yield* Deletion.find(record.id)) ?? record
})

/**
 * Erases a data subject's personal data in the tenant (subjects/Erasure.ts). Answers the running erasure, or the finished one
 * when the subject sent no personal data since, without starting another; resumes a failed one.
 */
export const erase = Effect.fn("BatchStart.erase")(function*(tenantId: string, subject: string, requestedBy: string) {
  const { first, record } = yield* Placement.writing(tenantId)(Erasure.start(tenantId, subject, requestedBy))
  if (first === undefined) return record
  yield* enqueueFirst(first, tenantId)
  return (yield* Placement.writing(tenantId)(Erasure.find(record.id))) ?? record
})
