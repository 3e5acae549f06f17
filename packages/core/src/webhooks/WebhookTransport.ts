/**
 * Outbound HTTP for webhook deliveries, as a service: the live layer is
 * `fetch` with the Standard Webhooks headers, a JSON body, a timeout (15 s),
 * redirects never followed (`redirect: "manual"`: a 3xx is a failed attempt,
 * so a public URL cannot bounce the request to a private one), and at most
 * 1 KiB of the response kept for the delivery log.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Telemetry from "../platform/Telemetry.js"
import * as Time from "../platform/Time.js"

export interface Response_ {
  /** The HTTP status, or null when no response came (timeout, DNS, connection refused). */
  readonly status: number | null
  /** `Retry-After` in seconds (delta or HTTP date), if the receiver sent one. */
  readonly retryAfterSeconds: number | undefined
  /** At most 1 KiB of the response body (or the network error). */
  readonly snippet: string
  readonly durationMs: number
}

export const timeoutMs = 15_000
export const maxSnippetBytes = 1_024

export class WebhookTransport extends Context.Service<WebhookTransport, {
  readonly post: (url: string, headers: Record<string, string>, body: string) => Effect.Effect<Response_>
}>()("@factline/core/WebhookTransport") {
  static readonly layer = Layer.succeed(WebhookTransport, { post: (url, headers, body) => post(url, headers, body) })
}

/** `Retry-After` in seconds: a delta as given, an HTTP date counted from `now` (milliseconds). */
export const parseRetryAfter = (value: string | null, now: number): number | undefined => {
  if (value === null) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed)
  const at = Date.parse(trimmed)
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000))
}

const readSnippet = async (response: Response): Promise<string> => {
  if (response.body === null) return ""
  const reader = response.body.getReader()
  const chunks: Array<Uint8Array> = []
  let size = 0
  try {
    while (size < maxSnippetBytes) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      size += value.byteLength
    }
  } finally {
    await reader.cancel().catch(() => undefined)
  }
  const bytes = new Uint8Array(Math.min(size, maxSnippetBytes))
  let offset = 0
  for (const chunk of chunks) {
    const part = chunk.subarray(0, bytes.byteLength - offset)
    bytes.set(part, offset)
    offset += part.byteLength
    if (offset >= bytes.byteLength) break
  }
  return new TextDecoder().decode(bytes)
}

const timedPost = Effect.fn("WebhookTransport.post", { kind: "client" })(function*(url: string, headers: Record<string, string>, body: string): Effect.fn.Return<Response_> {
  const started = yield* Time.millis
  const sent = yield* Effect.promise(() => send(url, headers, body))
  const ended = yield* Time.millis
  if (sent.status !== null) yield* Effect.annotateCurrentSpan("http.response.status_code", sent.status)
  return { status: sent.status, retryAfterSeconds: parseRetryAfter(sent.retryAfter, ended), snippet: sent.snippet, durationMs: ended - started }
})

/**
 * One POST, timed by the Clock: its status, `Retry-After`, the start of its body (or the network error). Its
 * span (exported when Telemetry is on) is a child of the attempt's `traceparent` header, in the fact's trace.
 */
export const post = (url: string, headers: Record<string, string>, body: string): Effect.Effect<Response_> =>
  timedPost(url, headers, body).pipe(Telemetry.under(headers.traceparent))

const send = async (url: string, headers: Record<string, string>, body: string): Promise<{ status: number | null; retryAfter: string | null; snippet: string }> => {
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json", "user-agent": "factline-webhooks/1" },
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(timeoutMs)
    })
    const snippet = await readSnippet(response)
    return { status: response.status, retryAfter: response.headers.get("retry-after"), snippet }
  } catch (error) {
    const name = error instanceof Error ? error.name : "Error"
    const text = name === "TimeoutError" || name === "AbortError" ? `no response within ${timeoutMs / 1000} s` : error instanceof Error ? error.message : String(error)
    return { status: null, retryAfter: null, snippet: text.slice(0, maxSnippetBytes) }
  }
}
