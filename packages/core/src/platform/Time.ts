/**
 * The time of day as factline stores it, read from Effect's `Clock` — the one clock of the framework, so a
 * test can move it (`TestClock`) and nothing reads the wall clock behind its back. It only reads and formats;
 * durations and delays are the callers'.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

/** Milliseconds since the epoch. */
export const millis: Effect.Effect<number> = Clock.currentTimeMillis

/** Now as an ISO-8601 timestamp (`2026-11-24T03:00:00.000Z`): what every stored `*_at` column holds. */
export const now: Effect.Effect<string> = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

/** `ms` milliseconds before now, as an ISO-8601 timestamp (a retention or staleness cutoff). */
export const ago = (ms: number): Effect.Effect<string> => Effect.map(Clock.currentTimeMillis, (at) => new Date(at - ms).toISOString())
