/**
 * Accepted events kept for a while, in development only: what lets `factline recover` re-send an event that
 * only ever lived on the local events queue, which `wrangler dev` does not keep across a restart
 * (docs/reliability.md, "What a restart loses locally").
 *
 * Opt-in by `FACTLINE_KEEP_ACCEPTED` (a duration, `10m`; `npm run dev` sets it): the HTTP edge writes each
 * request's accepted envelopes — as accepted, before any payload is moved to R2 — as one NDJSON object
 * `_kept/<accepted at>_<random>.ndjson` of the payload bucket, before it sends them. Keys sort by time, so
 * recovery lists the window it wants and prunes what is older than the setting. Off (the default, and what
 * production should run), nothing is written: no object, no round trip.
 *
 * It keeps copies, nothing more: whether a kept event still needs sending (its stream holds no fact caused by
 * its key) is Recovery's question, and sending one twice is harmless (the events consumer dedupes by key).
 * A tenant id never starts with `_`, so `_kept/` is never a tenant's prefix.
 */
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { Envelope } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import type { Storage } from "../platform/Storage.js"
import * as ObjectLayout from "../platform/ObjectLayout.js"

export const prefix = ObjectLayout.keptPrefix

/** The variable that turns keeping on, and how long a kept request is kept. */
export const variable = "FACTLINE_KEEP_ACCEPTED"

/** What a refusal of the bucket names. */
const service = "the kept events (R2)"

/** `10m`, `90s`, `1h` → milliseconds; `0`, `off` or nothing → 0 (off); anything else: why not. */
export const parseDuration = (raw: string | undefined): number | string => {
  if (raw === undefined || raw.trim() === "" || raw.trim() === "0" || raw.trim() === "off") return 0
  const match = /^(\d+)\s*(s|m|h)$/.exec(raw.trim())
  if (match === null) return `${variable}: a duration such as 10m, 90s or 1h (or off), got ${JSON.stringify(raw)}`
  return Number(match[1]) * { s: 1_000, m: 60_000, h: 3_600_000 }[match[2] as "s" | "m" | "h"]
}

/** Writes one request's accepted envelopes (what the producer is given as `keep`). */
export type Keep = (envelopes: ReadonlyArray<Envelope>, acceptedAt: string) => Effect.Effect<void, Failure.Unavailable>

export const keeper = (storage: Storage): Keep => {
  const kept = storage.named(service)
  return (envelopes, acceptedAt) =>
    envelopes.length === 0
      ? Effect.void
      : kept.put(`${prefix}${acceptedAt}_${crypto.randomUUID()}.ndjson`, envelopes.map((e) => JSON.stringify(e)).join("\n"), "application/x-ndjson").pipe(Effect.asVoid)
}

/** The envelopes accepted at or after `since` (ISO-8601), oldest request first. */
export const since = Effect.fn("KeptEvents.since")(function*(storage: Storage, from: string) {
  const kept = storage.named(service)
  const wanted = yield* Stream.runCollect(kept.list(prefix).pipe(Stream.filter((key) => key >= `${prefix}${from}`)))
  const texts = yield* Effect.forEach(wanted.sort(), (key) => kept.text(key), { concurrency: 8 })
  return texts.flatMap((text) => (text ?? "").split("\n").filter((line) => line !== "").map((line) => JSON.parse(line) as Envelope))
})

/** Deletes what was accepted before `before` (ISO-8601); returns how many requests' objects were deleted. */
export const prune = Effect.fn("KeptEvents.prune")(function*(storage: Storage, before: string) {
  const kept = storage.named(service)
  const old = yield* Stream.runCollect(kept.list(prefix).pipe(Stream.filter((key) => key < `${prefix}${before}`)))
  yield* kept.delete(old)
  return old.length
})
