/**
 * A tenant's batch operations as its operators see them: imports, exports and reconciles (`batch_jobs`, on the
 * tenant's read database) and the rebuilds its tokens started (`projection_rebuilds`, on the platform
 * database) — listed together newest first, read, cancelled; an export's output streamed back; an import's file
 * uploaded. Another tenant's operation reads as missing. Starting one is BatchStart.ts; running its chunks the batch
 * consumer's.
 */
import * as Effect from "effect/Effect"
import { Issues } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import * as Placement from "../placement/Placement.js"
import * as Rebuild from "../projections/Rebuild.js"
import * as Cursor from "../tables/Cursor.js"
import * as Time from "../platform/Time.js"
import { BatchFiles } from "./BatchFiles.js"
import * as BatchJobs from "./BatchJobs.js"
import * as Export from "./Export.js"
import { uploadKey } from "./BatchStart.js"

/** A rebuild record as a batch operation: its progress is in shards, its items are the replayed facts. */
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

export type View = BatchJobs.View | ReturnType<typeof rebuildView>

/**
 * A page of the tenant's operations, newest first (by creation, then id), with `status` when given (`completed`
 * is a rebuild's success), after `cursor` (a previous page's `next_cursor`; a malformed one is InvalidInput).
 */
export const list = Effect.fn("Batches.list")(function*(tenantId: string, options: { readonly status?: string | undefined; readonly cursor?: string | undefined; readonly limit: number }) {
  const cursor = options.cursor === undefined ? undefined : Cursor.decode(options.cursor, ["string", "string"]) as [string, string] | undefined
  if (options.cursor !== undefined && cursor === undefined) {
    const problems = [{ path: "cursor", message: "malformed cursor; use next_cursor from a previous page" }]
    return yield* new Failure.InvalidInput({ code: "invalid_query", message: Issues.render(problems), problems })
  }
  // Each table gives at most limit + 1 rows past the cursor; merged newest first, the page is exact.
  const page = { status: options.status, cursor, limit: options.limit + 1 }
  const [rebuilds, jobs] = yield* Effect.all([Rebuild.page(tenantId, page), Placement.reading(tenantId)(BatchJobs.page(tenantId, page))])
  const rows: Array<View> = [...rebuilds.map(rebuildView), ...jobs.map(BatchJobs.view)]
    .sort((a, b) => (a.created_at === b.created_at ? (a.batch_id < b.batch_id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1))
  const data = rows.slice(0, options.limit)
  const last = data.at(-1)
  return { data, next_cursor: rows.length > options.limit && last ? Cursor.encode([last.created_at, last.batch_id]) : null }
})

/** One of the tenant's operations; another tenant's id is the same NotFound as an unknown one. */
export const get = Effect.fn("Batches.get")(function*(tenantId: string, id: string) {
  const [job, rebuild] = yield* Effect.all([Placement.reading(tenantId)(BatchJobs.get(tenantId, id)), Rebuild.get(tenantId, id)])
  if (job) return BatchJobs.view(job) as View
  if (rebuild) return rebuildView(rebuild) as View
  return yield* new Failure.NotFound({ message: `no batch "${id}"` })
})

/** Stops further chunks of a queued or running job; a rebuild cannot be cancelled (Conflict, saying why). */
export const cancel = Effect.fn("Batches.cancel")(function*(tenantId: string, id: string) {
  const now = yield* Time.now
  // A rebuild's id is no batch job's: its NotFound becomes the Conflict that says why.
  const cancelled = yield* Placement.writing(tenantId)(BatchJobs.cancel(tenantId, id, now)).pipe(
    Effect.catchIf((error) => error instanceof Failure.NotFound, (notFound) =>
      Effect.flatMap(Rebuild.get(tenantId, id), (rebuild) =>
        Effect.fail(rebuild ? new Failure.Conflict({ message: "a rebuild cannot be cancelled; it ends when every shard is replayed" }) : notFound)))
  )
  return BatchJobs.view(cancelled)
})

/**
 * A succeeded export's file: its format, its file name and its parts (under the job's own prefix, never one
 * built from a request) streamed one after the other as they are read — never buffered.
 */
export const output = Effect.fn("Batches.output")(function*(tenantId: string, id: string) {
  const job = yield* Placement.reading(tenantId)(BatchJobs.get(tenantId, id))
  if (!job) return yield* new Failure.NotFound({ message: `no batch "${id}"` })
  if (job.output_key === null && job.status === "succeeded" && job.operation === "export" && job.error !== null) {
    // Its file was removed by an erasure (subjects/ErasureExports.ts): the error says which.
    return yield* new Failure.Conflict({ message: `batch ${id} has no output: ${job.error}` })
  }
  if (job.output_key === null || job.status !== "succeeded") {
    return yield* new Failure.Conflict({ message: `batch ${id} has no output${job.status === "succeeded" ? "" : ` (it is ${job.status})`}` })
  }
  const files = yield* BatchFiles
  const keys = yield* files.keys(Export.outputPrefix(job.tenant_id, job.id))
  const format = (JSON.parse(job.params) as Export.Params).format
  return { format, fileName: `${job.id}.${format}`, body: concatenated(keys, (key) => Effect.runPromise(files.stream(key))) }
})

/** The objects at `keys`, one after the other, each read when the previous one has been consumed. */
const concatenated = (keys: ReadonlyArray<string>, open: (key: string) => Promise<ReadableStream<Uint8Array> | undefined>) => {
  let next = 0
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        if (reader === undefined) {
          if (next === keys.length) return controller.close()
          const key = keys[next++]!
          const part = await open(key)
          if (part === undefined) throw new Error(`output part ${key} is missing`)
          reader = part.getReader()
        }
        const read = await reader.read()
        if (!read.done) return controller.enqueue(read.value)
        reader = undefined
      }
    },
    cancel: (reason) => reader?.cancel(reason)
  })
}

/** Stores an import's NDJSON file of the tenant's (streamed, of a known `length`) under its name; the stored size. */
export const upload = Effect.fn("Batches.upload")(function*(tenantId: string, name: string, body: ReadableStream<Uint8Array>, length: number) {
  return yield* (yield* BatchFiles).upload(uploadKey(tenantId, name), body, length)
})
