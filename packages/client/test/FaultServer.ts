/**
 * A local HTTP server standing in for the factline API, for fault injection only: each test scripts the
 * answer to each request (an API answer, a 429 with `Retry-After`, a 503, a connection reset) and reads
 * back what the client sent, byte for byte. It checks nothing itself; the platform's own behaviour is
 * tested against the real Worker (apps/example/test/client.workers.test.ts).
 */
import { createServer } from "node:http"

export interface Received {
  readonly method: string
  /** Path and query, as sent. */
  readonly url: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  readonly body: string
  /** The events of a `POST /v1/events` body, in order. */
  readonly events: ReadonlyArray<Record<string, any>>
  /** When it arrived (ms, `Date.now()`). */
  readonly at: number
}

export type Reply =
  | { readonly status: number; readonly body?: unknown; readonly headers?: Readonly<Record<string, string>> }
  /** Closes the connection without an answer, after reading the request. */
  | "reset"
  /** Never answers (until the server closes). */
  | "hang"

export interface FaultServer {
  readonly url: string
  readonly received: ReadonlyArray<Received>
  readonly close: () => Promise<void>
}

/** Starts a server answering request number `n` (0-based) with `answer(request, n)`. */
export const start = async (answer: (request: Received, n: number) => Reply): Promise<FaultServer> => {
  const received: Array<Received> = []
  const server = createServer((req, res) => {
    const chunks: Array<Uint8Array> = []
    req.on("data", (chunk) => chunks.push(chunk))
    req.on("end", () => {
      const bytes = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0))
      chunks.reduce((offset, c) => (bytes.set(c, offset), offset + c.length), 0)
      const body = new TextDecoder().decode(bytes)
      let events: ReadonlyArray<Record<string, any>> = []
      try {
        const parsed = JSON.parse(body)
        events = Array.isArray(parsed?.events) ? parsed.events : []
      } catch {
        // a GET, or not JSON: no events
      }
      const request: Received = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body, events, at: Date.now() }
      received.push(request)
      const reply = answer(request, received.length - 1)
      if (reply === "reset") return req.socket.destroy()
      if (reply === "hang") return
      res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers })
      res.end(reply.body === undefined ? "" : JSON.stringify(reply.body))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("the fault server has no port")
  return {
    url: `http://127.0.0.1:${address.port}`,
    received,
    close: () => {
      server.closeAllConnections()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

/** The API's 202 for a request: every event accepted, `duplicate` for the keys in `duplicates`. */
export const accepted = (request: Received, duplicates: ReadonlyArray<string> = []): Reply => ({
  status: 202,
  body: {
    accepted: request.events.length,
    idempotency_keys: request.events.map((e) => e.idempotency_key),
    items: request.events.map((e) => ({ idempotency_key: e.idempotency_key, duplicate: duplicates.includes(e.idempotency_key) }))
  }
})

/** The API's error shape. */
export const error = (status: number, code: string, message: string, details?: unknown, headers?: Readonly<Record<string, string>>): Reply => ({
  status,
  body: { error: details === undefined ? { code, message } : { code, message, details } },
  ...(headers === undefined ? {} : { headers })
})
