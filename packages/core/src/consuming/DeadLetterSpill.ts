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
import * as Failure from "../failures/Failure.js"
import { PayloadBucket } from "../platform/Bindings.js"

/** Where spilled dead letters are, in the payload bucket. */
export const prefix = "_platform/dead-letters/spilled/"
/** Format version of a spilled object. */
export const version = 1
/** How many spilled dead letters `count` counts at most (R2 lists 1,000 keys a page: ten pages). */
export const countLimit = 10_000
/** Puts in flight at once (one object per message, a batch holds up to 100): a Worker opens 6 connections at a time. */
const concurrency = 6

const unavailable = Failure.unavailable("the dead-letter spill (R2)")

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
  const { bucket } = yield* PayloadBucket
  const results = yield* Effect.forEach(spills, (spill) =>
    Effect.result(Effect.tryPromise({
      try: () => bucket.put(keyOf(spill.dead_letter_queue, spill.message_id), JSON.stringify(spill), { httpMetadata: { contentType: "application/json" } }),
      catch: unavailable
    })).pipe(Effect.map((result) => ({ spill, result }))), { concurrency })
  const written = new Set<string>()
  for (const { spill, result } of results) {
    if (Result.isSuccess(result)) written.add(spill.message_id)
    else yield* Effect.logError(`dead letter ${spill.message_id} of ${spill.dead_letter_queue} could not be spilled to R2 either: ${result.failure.message}`)
  }
  return written
})

/** The first `limit` spilled objects' keys, in key order. */
export const keys = Effect.fn("DeadLetterSpill.keys")(function*(limit: number) {
  const { bucket } = yield* PayloadBucket
  return yield* Effect.tryPromise({
    try: async () => {
      const out: Array<string> = []
      let cursor: string | undefined
      do {
        const page = await bucket.list(cursor === undefined ? { prefix } : { prefix, cursor })
        out.push(...page.objects.map((o) => o.key))
        cursor = page.truncated ? page.cursor : undefined
      } while (cursor !== undefined && out.length < limit)
      return out.slice(0, limit)
    },
    catch: unavailable
  })
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
  const { bucket } = yield* PayloadBucket
  const text = yield* Effect.tryPromise({ try: async () => (await bucket.get(key))?.text(), catch: unavailable })
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

/** Deletes the objects at `keys` (R2 deletes up to 1,000 keys a call). */
export const remove = Effect.fn("DeadLetterSpill.remove")(function*(keys: ReadonlyArray<string>) {
  const { bucket } = yield* PayloadBucket
  for (let i = 0; i < keys.length; i += 1_000) {
    const chunk = keys.slice(i, i + 1_000)
    yield* Effect.tryPromise({ try: () => bucket.delete(chunk), catch: unavailable })
  }
})
