/**
 * `import`: NDJSON envelopes from R2 into the ledger, one chunk per message.
 *
 * Each chunk reads the next lines of the input by byte range (never the whole
 * object), decodes and routes them with the events consumer's own `decode`
 * (strict envelope, known type, payload checked) and
 * appends them with its `process` — the keys bound in `accepted_keys` in one
 * round trip, then one ledger call (one RPC per shard) and one relay for the
 * chunk: the same path, and the same idempotency, as live events. So re-running
 * an import appends nothing new, and a line is either appended whole or not at
 * all. A line that cannot be imported (not JSON, not an envelope, another
 * tenant's, a `payload_ref` — set by the producer only: a client's could name
 * any object of the tenant's prefix, read whole past the line limit —, refused
 * by its handler, an idempotency key bound to another payload) is counted and
 * reported with its line number; the job goes on.
 *
 * A transient failure (the ledger, D1, R2) fails the chunk, which the queue
 * retries: everything it did is idempotent. Progress is recorded once per
 * chunk (BatchJobs.recordChunk), so a redelivered chunk whose progress is
 * recorded only sends the next chunk again (the inbox dedupes it).
 * D1 round trips per chunk are constant: the job read, the keys claim, the
 * progress write (plus the batch queue's inbox).
 *
 * It does not: dead-letter a bad line (it is reported on the job instead),
 * or accept a line longer than `maxLineBytes`.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import type { BatchPayload } from "@factline/schemas"
import type * as Consumer from "../consuming/Consumer.js"
import * as Failure from "../failures/Failure.js"
import * as EventsConsumer from "../routing/EventsConsumer.js"
import * as PayloadStore from "../producing/PayloadStore.js"
import * as BatchFiles from "./BatchFiles.js"
import * as BatchJobs from "./BatchJobs.js"
import * as Time from "../platform/Time.js"

/** Lines per chunk: one ledger append and one relay for up to this many envelopes. */
export const linesPerChunk = 100
/** The byte window a chunk reads; a line longer than this fails the job. */
export const maxLineBytes = 1024 * 1024
/** Envelopes per inline import request. */
export const maxInlineEvents = 1_000

const newline = 0x0a

/** The first `max` complete lines of `bytes` (the last one may end at `eof`), and the bytes they take. */
export const splitLines = (bytes: Uint8Array, max: number, eof: boolean) => {
  const lines: Array<Uint8Array> = []
  let start = 0
  while (lines.length < max && start < bytes.length) {
    const end = bytes.indexOf(newline, start)
    if (end === -1) {
      if (!eof) break
      lines.push(bytes.subarray(start))
      start = bytes.length
      break
    }
    lines.push(bytes.subarray(start, end))
    start = end + 1
  }
  return { lines, consumed: start }
}

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false })

/** One line's envelope for the job's tenant, or why it is not one. */
const envelopeOf = (bytes: Uint8Array, tenantId: string): { readonly envelope: unknown } | { readonly error: string } | undefined => {
  let text: string
  try {
    text = decoder.decode(bytes)
  } catch {
    return { error: "the line is not valid UTF-8" }
  }
  if (text.trim() === "") return undefined
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { error: "the line is not JSON" }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { error: "the line is not an envelope object" }
  const tenant = (value as Record<string, unknown>).tenant_id
  if (tenant !== undefined && tenant !== tenantId) return { error: "tenant_id names another tenant than the job's" }
  // Checked before decode, which would load the object (the events queue's refs are the producer's own).
  if ("payload_ref" in value) return { error: `payload_ref ${PayloadStore.clientRefRefused} (an import line takes up to ${maxLineBytes / 1024 / 1024} MiB)` }
  return { envelope: { ...value, tenant_id: tenantId } }
}

/** A reported line error's length: a job keeps up to `BatchJobs.maxErrors` of them in one row. */
const maxErrorChars = 2_000

/** A line's failure as the job reports it: `reason: text` (a retryable one fails the chunk instead), cut at 2,000 characters. */
const lineError = (failure: Failure.Failure) => {
  const text = `${failure.reason}: ${failure.message}`
  return text.length > maxErrorChars ? `${text.slice(0, maxErrorChars)}…` : text
}

/** Runs one chunk; returns the next chunk's message payload, or undefined when the job is done (or stopped). */
export const step = Effect.fn("Import.step")(function*(payload: BatchPayload) {
  const files = yield* BatchFiles.BatchFiles
  const job = yield* BatchJobs.find(payload.batch_id)
  if (!job || BatchJobs.isFinished(job.status)) return undefined
  const chunk = payload.offset
  const next: BatchPayload = { ...payload, offset: chunk + 1 }
  // Recorded by an earlier delivery: only the next chunk may still be missing (the inbox dedupes a second send).
  if (job.chunks_done > chunk) return next
  if (job.chunks_done < chunk) return yield* new Failure.TransientError({ message: `chunk ${chunk} arrived before chunk ${job.chunks_done} was recorded` })
  const now = yield* Time.now
  if (job.status === "queued") yield* BatchJobs.markRunning(job.id, now)
  if (job.input_key === null) return yield* new Failure.PermanentError({ message: "the job has no input" })

  const range = yield* files.read(job.input_key, job.cursor, maxLineBytes)
  if (range === undefined) return yield* new Failure.PermanentError({ message: `the input ${job.input_key} does not exist` })
  const eof = job.cursor + range.bytes.length >= range.size
  const { lines, consumed } = splitLines(range.bytes, linesPerChunk, eof)
  if (lines.length === 0 && !eof) {
    return yield* new Failure.PermanentError({ message: `line ${job.offset + 1} is longer than ${maxLineBytes} bytes` })
  }

  // Decode every line; keep its line number with its item key (copies of one envelope share a key).
  const errors: Array<BatchJobs.ItemError> = []
  const items: Array<Consumer.Item<EventsConsumer.Keyed>> = []
  const linesOf = new Map<string, Array<number>>()
  for (let i = 0; i < lines.length; i++) {
    const line = job.offset + i + 1
    const parsed = envelopeOf(lines[i]!, job.tenant_id)
    if (parsed === undefined) continue
    if ("error" in parsed) {
      errors.push({ line, error: parsed.error })
      continue
    }
    const decoded = yield* Effect.exit(EventsConsumer.decode(parsed.envelope))
    if (Exit.isFailure(decoded)) {
      const failure = Failure.classify(decoded.cause)
      if (failure.retryable) return yield* new Failure.TransientError({ message: `line ${line}: ${failure.message}` })
      errors.push({ line, error: lineError(failure) })
      continue
    }
    for (const item of decoded.value) {
      const known = linesOf.get(item.key)
      if (known) known.push(line)
      else {
        linesOf.set(item.key, [line])
        items.push(item)
      }
    }
  }

  // Append through the events path: one claim, one ledger call, one relay for the chunk.
  let succeeded = 0
  if (items.length > 0) {
    const outcomes = yield* EventsConsumer.process(items)
    for (const { key } of items) {
      const outcome = outcomes.get(key)
      const at = linesOf.get(key)!
      if (outcome === undefined || (Result.isFailure(outcome) && outcome.failure.retryable)) {
        const error = outcome === undefined ? "no outcome" : Result.isFailure(outcome) ? outcome.failure.message : ""
        return yield* new Failure.TransientError({ message: `line ${at[0]}: ${error}` })
      }
      if (Result.isSuccess(outcome)) succeeded += at.length
      else for (const line of at) errors.push({ line, error: lineError(outcome.failure) })
    }
  }
  errors.sort((a, b) => a.line - b.line)
  const last = eof && job.cursor + consumed >= range.size
  const status = yield* BatchJobs.recordChunk(job, { chunk, lines: lines.length, bytes: consumed, succeeded, errors, last }, now)
  return status === "running" ? next : undefined
})
