/**
 * The dead-letter consumer's last resort: R2. The `*-dlq` queues have no dead-letter queue of their own, so a
 * dead letter D1 keeps refusing would be gone after the consumer's last delivery (≈ 55 min of retries). From
 * `RetryPolicy.deadLetterConsumer.spillFromAttempt` on, DeadLetterConsumer writes such a dead letter here
 * instead — "spilled" — and acks it only once the object is written; R2 refusing too leaves it retried.
 *
 * One object per DLQ message, under the platform's prefix `_platform/dead-letters/spilled/` (a tenant id
 * starts with a letter or digit, so no tenant's prefix can hold it), keyed by the DLQ queue and the message
 * id — stable across redeliveries — so spilling one message twice overwrites its object, never adds one. The
 * object carries the `dead_messages` row exactly as the consumer would have inserted it: the cron
 * (`DeadLetterConsumer.recoverSpilled`) inserts it (idempotent by id, as the consumer's own insert), then
 * deletes the object. Until then the health page and the platform's `GET /v1/dlq` count them (`count`).
 *
 * It does not decide when to spill, read D1 or write it (DeadLetterConsumer does both).
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { PayloadBucket } from "../platform/Bindings.js"
import * as ObjectLayout from "../platform/ObjectLayout.js"

/** Where spilled dead letters are, in the payload bucket. */
export const prefix = ObjectLayout.spilledPrefix
/** Format version of a spilled object. */
export const version = 1
/** How many spilled dead letters `count` counts at most (R2 lists 1,000 keys a page: ten pages). */
export const countLimit = 10_000
/** Puts in flight at once (one object per message, a batch holds up to 100): a Worker opens 6 connections at a time. */
const concurrency = 6

/** The payload bucket, its refusals named as the spill's. */
const spillBucket = Effect.map(Effect.service(PayloadBucket), (storage) => storage.named("the dead-letter spill (R2)"))

/** One spilled dead letter: its DLQ queue and message, and the `dead_messages` row to insert, by column. */
export interface Spilled {
  readonly version: typeof version
  readonly dead_letter_queue: string
  readonly message_id: string
  readonly attempts: number
  readonly spilled_at: string
  readonly row: Readonly<Record<string, string | number | null>>
}

/** The object key of a DLQ message: the same message always maps to the same key. */
export const keyOf = (deadLetterQueue: string, messageId: string) =>
  `${prefix}${encodeURIComponent(deadLetterQueue)}/${encodeURIComponent(messageId)}.json`

/** Writes each dead letter as its own object; returns the message ids written (a refused put is left out and logged). */
export const write = Effect.fn("DeadLetterSpill.write")(function*(spills: ReadonlyArray<Spilled>) {
  const storage = yield* spillBucket
  const results = yield* Effect.forEach(spills, (spill) =>
    Effect.result(storage.put(keyOf(spill.dead_letter_queue, spill.message_id), JSON.stringify(spill), "application/json"))
      .pipe(Effect.map((result) => ({ spill, result }))), { concurrency })
  const written = new Set<string>()
  for (const { spill, result } of results) {
    if (Result.isSuccess(result)) written.add(spill.message_id)
    else yield* Effect.logError(`dead letter ${spill.message_id} of ${spill.dead_letter_queue} could not be spilled to R2 either: ${result.failure.message}`)
  }
  return written
})

/** The first `limit` spilled objects' keys, in key order. */
export const keys = Effect.fn("DeadLetterSpill.keys")(function*(limit: number) {
  const storage = yield* spillBucket
  return yield* Stream.runCollect(Stream.take(storage.list(prefix), limit))
})

/** How many dead letters are spilled and not yet recovered, counted up to `countLimit` (`more`: there are more). */
export const count = Effect.fn("DeadLetterSpill.count")(function*() {
  const listed = yield* keys(countLimit + 1)
  return { count: Math.min(listed.length, countLimit), more: listed.length > countLimit }
})

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The spilled dead letter at `key`: undefined if it is gone (another run recovered it), `invalid` if the
 * object is not one (it is left in place, and counted, for an operator to look at).
 */
export const read = Effect.fn("DeadLetterSpill.read")(function*(key: string) {
  const text = yield* (yield* spillBucket).text(key)
  if (text === undefined) return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return "invalid" as const
  }
  if (!isRecord(parsed) || parsed.version !== version || !isRecord(parsed.row) || typeof parsed.message_id !== "string" || typeof parsed.dead_letter_queue !== "string") return "invalid" as const
  if (keyOf(parsed.dead_letter_queue, parsed.message_id) !== key) return "invalid" as const
  return parsed as unknown as Spilled
})

/** Deletes the objects at `keys`. */
export const remove = Effect.fn("DeadLetterSpill.remove")(function*(keys: ReadonlyArray<string>) {
  yield* (yield* spillBucket).delete(keys)
})
