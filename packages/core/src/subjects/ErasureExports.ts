/**
 * What an erasure (Erasure.ts) does to the tenant's export files: a batch export (batch/Export.ts) opens personal
 * fields, so its output in R2 is a plaintext copy. Every succeeded export of the tenant created before the erasure's
 * `clean_after` (it may have opened the subject's fields with a key still live or cached) whose output holds the
 * subject is deleted: its parts removed from R2, the job kept with `output_key` NULL and its `error` saying which
 * erasure removed the file (`GET /v1/batches/:id/output` answers that, a 409 problem). Counted as `exports: { deleted }`.
 *
 * Holding the subject is read from the file's text, streamed part by part through the bucket's door (never loaded
 * whole; a part stops being read at its first match): in NDJSON, the subject id as a JSON string value of one of
 * the subject fields — each personal fact type's `subject` field and each projection's erasure subject column —
 * (`"buyer_id":"<subject>"`); in CSV (a projection's rows), the subject id as a whole cell (quoted as the export
 * quotes it) — any column's, so a CSV file where another column holds the same text is deleted too (on the safe side).
 * An export still running that was created before `clean_after` is waited out by the cleaning (Erasure.ts).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Failure from "../failures/Failure.js"
import * as Sql from "../platform/Sql.js"
import type { Storage } from "../platform/Storage.js"
import type { Registry } from "../registry/Registry.js"

const unavailable = Failure.unavailable("the read database")

/** An export's formats (batch/Export.ts; not imported: batch runs the erasure). */
type Format = "ndjson" | "csv"

const Job = Schema.Struct({ id: Schema.String, params: Schema.String, output_key: Schema.NullOr(Schema.String), error: Schema.NullOr(Schema.String) })

/** The export jobs of the tenant created before `before` still having an output (succeeded), or still running. */
const jobsStatement = (tenantId: string, before: string, status: "succeeded" | "running") =>
  Sql.statement(
    `SELECT id, params, output_key, error FROM batch_jobs WHERE tenant_id = ? AND operation = 'export' AND status = ? AND created_at < ?${status === "succeeded" ? " AND output_key IS NOT NULL" : ""} ORDER BY created_at, id`,
    tenantId, status, before
  )

/** A running export of the tenant created before `before` (the cleaning waits for it), if any. */
export const running = (sql: Sql.Sql, tenantId: string, before: string) =>
  Effect.map(Effect.mapError(sql.all(Job, jobsStatement(tenantId, before, "running")), unavailable), (jobs) => jobs[0]?.id)

/** The field names a file names the subject under: each personal fact type's subject field, each projection's erasure subject column. */
export const subjectFields = (registry: Pick<Registry["Service"], "personalFact" | "facts" | "projections">) => {
  const fields = new Set<string>()
  for (const type of registry.facts.keys()) {
    const declaration = registry.personalFact(type)
    if (declaration !== undefined) fields.add(declaration.subject)
  }
  for (const p of registry.projections) if (p.erasure !== undefined && p.erasure.action !== "none") fields.add(p.erasure.subject)
  return [...fields]
}

const csvCell = (value: string) => (/[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value)

/** Whether `text` holds the subject (see the module's comment), for a file of `format`. */
export const matcher = (format: Format, fields: ReadonlyArray<string>, subject: string): { readonly test: (text: string) => boolean; readonly longest: number } => {
  if (format === "ndjson") {
    const patterns = fields.map((f) => `${JSON.stringify(f)}:${JSON.stringify(subject)}`)
    return { test: (text) => patterns.some((p) => text.includes(p)), longest: Math.max(0, ...patterns.map((p) => p.length)) }
  }
  const cell = csvCell(subject)
  const escaped = cell.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
  const pattern = new RegExp(`[,\\n]${escaped}[,\\r\\n]`)
  // A delimiter on either side places the cell (the text is read as if a line break came before and after it, so
  // the first and the last cell count); a cell ending a chunk is matched with the next one's first character.
  return { test: (text) => pattern.test(text), longest: cell.length + 2 }
}

/** Whether a streamed text matches, read chunk by chunk with an overlap between chunks (stops at the first match). */
export const streamHolds = async (body: ReadableStream<Uint8Array>, match: ReturnType<typeof matcher>): Promise<boolean> => {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let carry = "\n"
  for (;;) {
    const read = await reader.read()
    const text = carry + (read.done ? `${decoder.decode()}\n` : decoder.decode(read.value, { stream: true }))
    if (match.test(text)) {
      if (!read.done) await reader.cancel()
      return true
    }
    if (read.done) return false
    carry = text.slice(-match.longest)
  }
}

/** Whether the object at `key` matches, streamed. */
const partHolds = (storage: Storage, key: string, match: ReturnType<typeof matcher>) =>
  Effect.gen(function*() {
    const body = yield* storage.stream(key)
    if (body === undefined) return false
    return yield* Effect.tryPromise({ try: () => streamHolds(body, match), catch: Failure.unavailable("the export files") })
  })

const removedBy = (erasureId: string) => `its output was removed by the erasure ${erasureId} of a data subject it held (personal data in plaintext); export again`

/** Deletes the subject's export files (created before `before`); how many. Run again, it finds none left. */
export const clean = (sql: Sql.Sql, bucket: Storage, registry: Registry["Service"], tenantId: string, subject: string, erasureId: string, before: string, now: string) =>
  Effect.gen(function*() {
    const storage = bucket.named("the export files")
    const fields = subjectFields(registry)
    const jobs = yield* Effect.mapError(sql.all(Job, jobsStatement(tenantId, before, "succeeded")), unavailable)
    const note = removedBy(erasureId)
    let deleted = 0
    for (const job of jobs) {
      const format = (JSON.parse(job.params) as { readonly format?: Format }).format ?? "ndjson"
      const match = matcher(format, fields, subject)
      if (job.output_key === null) continue
      // The output's parts: `output_key` is their prefix (batch/Export.ts).
      const keys = [...(yield* Stream.runCollect(storage.list(job.output_key)))].sort()
      // Marked by this erasure before a crash: its parts (some already deleted) go without reading them again.
      let holds = job.error === note
      for (const key of keys) {
        if (holds) break
        holds = yield* partHolds(storage, key, match)
      }
      if (!holds) continue
      // Marked first, the parts deleted, the output dropped last: a repeat after a crash finds the job by its mark.
      yield* Effect.mapError(sql.run(Sql.statement("UPDATE batch_jobs SET error = ?2 WHERE id = ?1", job.id, note)), unavailable)
      yield* storage.delete(keys)
      deleted += yield* Effect.mapError(sql.run(Sql.statement(
        "UPDATE batch_jobs SET output_key = NULL, updated_at = ?2 WHERE id = ?1 AND output_key IS NOT NULL",
        job.id, now
      )), unavailable)
    }
    return { deleted }
  })
