/**
 * When the client tries a request again: exponential backoff with jitter, and the server's `Retry-After`.
 *
 * Pure arithmetic (the caller passes the random number and the clock), so it is tested without waiting.
 * Which answers are retried is the Transport's decision, not this module's.
 */

export interface RetrySettings {
  /** Attempts per request, the first included (1 = never retry). */
  readonly maxAttempts: number
  /** The delay after the first failed attempt; it doubles after each further one. */
  readonly initialDelayMs: number
  /** No wait is longer, a `Retry-After` included. */
  readonly maxDelayMs: number
}

export const defaults: RetrySettings = { maxAttempts: 5, initialDelayMs: 250, maxDelayMs: 30_000 }

/**
 * The wait after `attempts` failed attempts (1-based): `min(initial · 2^(attempts−1), max)`, spread over
 * [delay/2, delay] by `jitter` (a number in [0, 1)) so that clients failing together do not come back
 * together. A `Retry-After` (in ms) waits at least that long, up to `maxDelayMs`.
 */
export const delay = (settings: RetrySettings, attempts: number, jitter: number, retryAfterMs?: number): number => {
  const n = Math.max(1, Math.floor(attempts))
  const exponential = Math.min(settings.initialDelayMs * Math.pow(2, Math.min(n - 1, 52)), settings.maxDelayMs)
  const jittered = exponential / 2 + (exponential / 2) * Math.min(Math.max(jitter, 0), 0.999999)
  return Math.round(Math.min(Math.max(jittered, retryAfterMs ?? 0), settings.maxDelayMs))
}

/** A `Retry-After` header in ms: delta seconds, or an HTTP date relative to `now`; undefined when absent or unreadable. */
export const retryAfterMs = (value: string | null, now: number): number | undefined => {
  if (value === null) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  const at = Date.parse(trimmed)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}
