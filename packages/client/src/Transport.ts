/**
 * One HTTP call to the factline API, with its retries: 429, 5xx, a network error, a timeout or a body cut
 * short are tried again — the identical request, so an emit's retry carries the same idempotency keys and the
 * platform accepts each event once however many attempts reached it — after `Backoff.delay` (which honours
 * `Retry-After`). Any other answer is returned as it is, for the caller to read; after the last attempt
 * the call fails with `Unavailable`. A streamed body (an upload) is sent once, and neither it nor a streamed
 * answer (a download) has a time limit: they take as long as the file does.
 *
 * It only needs a `fetch`, so it runs in Node, browsers and workerd alike. It does not know routes or read
 * the API's answers beyond the shared error shape (`{ error: { code, message, details? } }`): the derived
 * client (Api) does, from the API's description.
 */
import * as Backoff from "./Backoff.js"
import { Unavailable } from "./ClientError.js"

/** What the client calls to reach the API; `globalThis.fetch` fits, and so does a Worker's `SELF.fetch` wrapped. */
export type Fetch = (url: string, init: RequestInit) => Promise<Response>

export interface Settings {
  /** The API's origin (and path prefix, if it is mounted under one): `https://factline.example.com`. */
  readonly baseUrl: string
  /** A bearer token: `events:write` to emit, `read` to read. */
  readonly token: string
  readonly fetch: Fetch
  readonly retry: Backoff.RetrySettings
  /** Per attempt: an attempt without a whole answer by then is abandoned and retried. */
  readonly timeoutMs: number
}

/** A final (not retried) answer: its status and its JSON body (undefined when it had none or it was not JSON). */
export interface Answer {
  readonly status: number
  readonly body: unknown
  /** A streamed answer's body, unread (only when the request asked for it and the status is 2xx). */
  readonly stream?: ReadableStream<Uint8Array> | null
}

/** What to send: `path` holds the query; a body is JSON text unless `contentType` says otherwise. */
export interface Outgoing {
  readonly method: string
  readonly path: string
  readonly body?: string | { readonly stream: ReadableStream<Uint8Array> | Uint8Array; readonly length: number }
  readonly contentType?: string
  /** Return a 2xx answer's body unread, as `stream`. */
  readonly stream?: boolean
}

/** The API's error shape, as far as it is present in a body. */
export interface ApiError {
  readonly code: string | undefined
  readonly message: string | undefined
  readonly details: unknown
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

export const apiError = (body: unknown): ApiError => {
  const error = isObject(body) && isObject(body.error) ? body.error : {}
  return {
    code: typeof error.code === "string" ? error.code : undefined,
    message: typeof error.message === "string" ? error.message : undefined,
    details: error.details
  }
}

const retryable = (status: number) => status === 429 || status >= 500

const parse = (text: string): unknown => {
  if (text === "") return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** Why an attempt got no answer, in a few words: Node's fetch hides the socket's error code (or its reason) in `cause`. */
const describe = (error: unknown): string => {
  if (!(error instanceof Error)) return String(error)
  if (error.name === "TimeoutError" || error.name === "AbortError") return "no answer in time"
  const cause = (error as { cause?: unknown }).cause
  const detail = isObject(cause) && typeof cause.code === "string" ? cause.code : cause instanceof Error ? cause.message : undefined
  return detail === undefined ? error.message : `${error.message} (${detail})`
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** An attempt worth another: why, and — when the API answered (429, 5xx) — its status, body and `Retry-After`. */
interface Miss {
  readonly failure: string
  readonly status?: number
  readonly answered?: unknown
  readonly retryAfterMs?: number | undefined
}

/** A 429 or 5xx answer (its body read) as a miss. */
const missOf = (response: Response, text: string): Miss => {
  const answered = parse(text)
  const message = apiError(answered).message
  return {
    failure: message === undefined ? `${response.status}` : `${response.status} ${message}`,
    status: response.status,
    answered,
    retryAfterMs: Backoff.retryAfterMs(response.headers.get("retry-after"), Date.now())
  }
}

/**
 * Runs `once` up to `attempts` times, `Backoff.delay` apart, until it gives an answer; a throw (network, timeout)
 * is a miss too. After the last miss, `Unavailable` naming `label` and the last reason (and answer, if any).
 */
const retried = async <A>(settings: Settings, label: string, attempts: number, once: () => Promise<{ readonly answer: A } | Miss>): Promise<A> => {
  for (let attempt = 1; ; attempt++) {
    let miss: Miss
    try {
      const outcome = await once()
      if ("answer" in outcome) return outcome.answer
      miss = outcome
    } catch (error) {
      miss = { failure: describe(error) }
    }
    if (attempt >= attempts) {
      throw new Unavailable({
        message: `${label}: no answer after ${attempt} attempt(s); the last: ${miss.failure}`,
        attempts: attempt,
        last: miss.failure,
        ...(miss.status === undefined ? {} : { status: miss.status, body: miss.answered })
      })
    }
    await sleep(Backoff.delay(settings.retry, attempt, Math.random(), miss.retryAfterMs))
  }
}

export const request = async (settings: Settings, outgoing: Outgoing): Promise<Answer> => {
  const { method, path, body } = outgoing
  const url = `${settings.baseUrl.replace(/\/+$/, "")}${path}`
  const headers: Record<string, string> = { authorization: `Bearer ${settings.token}`, accept: "application/json" }
  if (body !== undefined) headers["content-type"] = outgoing.contentType ?? "application/json"
  const streamed = body !== undefined && typeof body !== "string"
  if (streamed) headers["content-length"] = String(body.length)
  // A stream can be read once: an upload is not retried.
  const attempts = streamed ? 1 : Math.max(1, Math.floor(settings.retry.maxAttempts))
  const timed = !streamed && outgoing.stream !== true
  // Called without a receiver: a browser's `fetch` passed as `fetch: fetch` throws "Illegal invocation" when called as a method.
  const fetch = settings.fetch
  return retried<Answer>(settings, `${method} ${path}`, attempts, async () => {
    const init: RequestInit & { duplex?: "half" } = {
      method,
      headers,
      ...(body === undefined ? {} : typeof body === "string" ? { body } : { body: body.stream as BodyInit, duplex: "half" }),
      ...(timed ? { signal: AbortSignal.timeout(settings.timeoutMs) } : {})
    }
    const response = await fetch(url, init)
    if (outgoing.stream === true && response.ok) return { answer: { status: response.status, body: undefined, stream: response.body } }
    // Read the whole body inside the attempt: a body cut short is no answer, and is retried like one.
    const text = await response.text()
    return retryable(response.status) ? missOf(response, text) : { answer: { status: response.status, body: parse(text) } }
  })
}

/**
 * `settings.fetch` with the retries of `request`, as a `fetch` (what the derived client's `HttpClient` calls):
 * 429, 5xx, a network error or a timeout are tried again — the identical request, so the same idempotency
 * keys — after `Backoff.delay`; any other answer is returned as it is. After the last attempt it throws
 * `Unavailable` (the derived client rejects with it). The body is read within each attempt.
 */
export const retrying = (settings: Settings): typeof globalThis.fetch => async (input, init) => {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url
  const method = init?.method ?? "GET"
  const path = url.startsWith(settings.baseUrl) ? url.slice(settings.baseUrl.replace(/\/+$/, "").length) : url
  const attempts = Math.max(1, Math.floor(settings.retry.maxAttempts))
  const fetch = settings.fetch
  return retried<Response>(settings, `${method} ${path}`, attempts, async () => {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(settings.timeoutMs) })
    const text = await response.text()
    return retryable(response.status)
      ? missOf(response, text)
      : { answer: new Response(response.status === 204 ? null : text, { status: response.status, statusText: response.statusText, headers: response.headers }) }
  })
}
