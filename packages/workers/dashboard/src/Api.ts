/**
 * The dashboard's calls to the HTTP API — the only file of the page that knows paths, query parameters,
 * bodies and response shapes (the routes are described in `src/http/*.ts`; only the fields the page reads
 * are typed here). Every call sends the session's token as a bearer token, asks for JSON, is never cached,
 * and fails with an `ApiError` carrying the API's status, code and message.
 *
 * A response that arrives after the session changed (sign-out, another sign-in) never settles: nothing of
 * an earlier session reaches the page. A 401 ends the session (`onUnauthorized`) and is dropped the same way.
 *
 * Hand-written for now: `@factline/client` has no request layer derived from the route descriptions yet.
 * When it has one, this file is the one to switch to it (the rest of the page only calls these functions).
 */
import * as Session from "./Session.js"

export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message)
  }
}

/** "401 unauthorized: invalid bearer token", or the message alone for a network failure. */
export const errorText = (error: unknown): string =>
  error instanceof ApiError ? `${error.status ? `${error.status} ${error.code}: ` : ""}${error.message}` : String(error)

let unauthorized: (message: string) => void = () => {}
/** What to do when the API refuses the token (the page signs out with this message). */
export const onUnauthorized = (handler: (message: string) => void): void => {
  unauthorized = handler
}

/** What a response of an earlier session becomes. */
const never = <A>(): Promise<A> => new Promise<A>(() => {})

const call = async <A>(method: "GET" | "POST", path: string, body?: unknown): Promise<A> => {
  const generation = Session.currentGeneration()
  const stale = () => generation !== Session.currentGeneration()
  const headers: Record<string, string> = { authorization: `Bearer ${Session.token() ?? ""}`, accept: "application/json" }
  if (body !== undefined) headers["content-type"] = "application/json"
  let response: Response
  try {
    response = await fetch(path, { method, headers, cache: "no-store", ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  } catch (error) {
    if (stale()) return never()
    throw new ApiError(0, "network", `cannot reach the API (${error instanceof Error && error.message ? error.message : "network error"})`)
  }
  if (stale()) return never()
  const text = await response.text()
  if (stale()) return never()
  let json: unknown = null
  try {
    json = text ? JSON.parse(text) : null
  } catch {
    json = null
  }
  if (!response.ok) {
    const problem = (json as { error?: { code?: string; message?: string } } | null)?.error ?? {}
    if (response.status === 401) {
      unauthorized(`The API refused this token: ${problem.message ?? "unauthorized"}. Enter a valid token.`)
      return never()
    }
    throw new ApiError(response.status, problem.code ?? `http_${response.status}`, problem.message ?? `${response.status} ${response.statusText}`)
  }
  return json as A
}

const query = (params: Readonly<Record<string, string | null | undefined>>): string => {
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) if (value) search.set(key, value)
  const text = search.toString()
  return text ? `?${text}` : ""
}
const segment = encodeURIComponent

// ------------------------------------------------------------------ queue health (GET /v1/queues/health)

export const healthWindows = ["15m", "1h", "6h", "24h"] as const
export type HealthWindow = (typeof healthWindows)[number]
export type Status = "ok" | "warning" | "critical"

export interface MinutePoint {
  readonly minute: string
  readonly received: number
  readonly lag_p99_ms: number | null
}
export interface QueueHealth {
  readonly queue: string
  readonly status: Status
  readonly checks?: Readonly<Record<string, string>>
  readonly received: number
  readonly acked: number
  readonly retried: number
  readonly dead_lettered: number
  readonly dlq_by_reason?: Readonly<Record<string, number>>
  readonly retry_rate: number
  readonly dlq_open: number
  readonly depth: number | null
  readonly lag_p50_ms: number | null
  readonly lag_p99_ms: number | null
  readonly processing_p99_ms: number | null
  readonly series?: ReadonlyArray<MinutePoint>
}
export interface Health {
  readonly window: HealthWindow
  readonly since: string
  readonly status: Status
  readonly queues: ReadonlyArray<QueueHealth>
  readonly ledger?: { readonly relay_pending_shards: number }
}

/** Needs the `platform` scope (a 403 otherwise). */
export const queueHealth = (window: HealthWindow) => call<Health>("GET", `/v1/queues/health${query({ window })}`)

// ------------------------------------------------------------------ dead letters (/v1/dlq)

export interface DeadLetterFilters {
  /** open, replaying, replayed, skipped, escalated; "" for all. */
  readonly status: string
  readonly queue: string
  readonly type: string
  readonly reason: string
}
export interface DeadLetter {
  readonly id: string
  readonly queue: string
  readonly status: string
  readonly reason: string
  readonly last_error: string
  readonly attempts: number
  readonly tenant_id: string | null
  readonly message_type: string | null
  readonly idempotency_key: string | null
  readonly subject: string | null
  readonly first_attempted_at: string
  readonly last_attempted_at: string
  readonly received_at: string
  readonly resolved_by: string | null
  readonly resolved_at: string | null
  readonly replay_operation_id: string | null
}
export interface DeadLetterDetail extends DeadLetter {
  readonly original_message: unknown
  readonly history: ReadonlyArray<{ readonly at: string; readonly action: string; readonly by: string; readonly note?: string; readonly operation_id?: string }>
}
export interface Page<A> {
  readonly data: ReadonlyArray<A>
  readonly next_cursor: string | null
}
export interface BulkReplay {
  readonly operation_id: string
  readonly count: number
  readonly waves: number
}

export const deadLetters = (filters: DeadLetterFilters, cursor: string | null) =>
  call<Page<DeadLetter>>("GET", `/v1/dlq${query({ status: filters.status, queue: filters.queue, type: filters.type, reason: filters.reason, limit: "50", cursor })}`)
export const deadLetter = (id: string) => call<DeadLetterDetail>("GET", `/v1/dlq/${segment(id)}`)
/** Sends it back to its queue with the same idempotency key. */
export const replay = (id: string) => call<DeadLetterDetail>("POST", `/v1/dlq/${segment(id)}/replay`)
/** Gives its work up; the API appends a reconciliation fact with the reason. */
export const skip = (id: string, reason: string) => call<DeadLetterDetail & { readonly reconciliation_fact_id: string }>("POST", `/v1/dlq/${segment(id)}/skip`, { reason })
export const escalate = (id: string, note: string) => call<DeadLetterDetail>("POST", `/v1/dlq/${segment(id)}/escalate`, note ? { note } : {})
/** Every open dead letter matching the queue, type and reason filters (not the status), in waves. */
export const replayMatching = (filters: DeadLetterFilters) =>
  call<BulkReplay>("POST", `/v1/dlq/replay${query({ queue: filters.queue, type: filters.type, reason: filters.reason })}`)

// ------------------------------------------------------------------ batch jobs (GET /v1/batches)

export interface BatchJob {
  readonly batch_id: string
  readonly operation: string
  readonly status: string
  readonly projection?: string
  readonly params?: { readonly projection?: string; readonly manifest?: string } | null
  /** Items (a rebuild's shards) done, of `total` (unknown until the end of a manifest). */
  readonly offset: number
  readonly total: number | null
  readonly succeeded: number
  readonly failed?: number
  readonly error?: string | null
  readonly errors?: ReadonlyArray<{ readonly line?: number; readonly error?: string }>
  readonly created_at: string
  readonly started_at: string | null
  readonly finished_at: string | null
}

export const batches = (limit: number) => call<Page<BatchJob>>("GET", `/v1/batches${query({ limit: String(limit) })}`)
