// The benchmark's webhook receiver (Node, in the bench process): a variant of
// apps/example/scripts/Receiver.mjs that keeps nothing but counts. Every POST is answered 200 "ok".
// Deliveries are counted per run — the run is the prefix of the payload's `call_id` before "_c", as
// the bench names calls — as distinct `webhook-id`s and as requests (the difference: redeliveries).
// On a path whose endpoint secret was registered (`verify(path, secret)`), every delivery's signature
// is checked with the official `standardwebhooks` package (~0.03 ms each); failures are counted. The
// arrival time of each run's distinct webhook-ids is kept (a number each), for the steady-state rate.
import { createServer } from "node:http"
import { Webhook } from "standardwebhooks"

export const start = async () => {
  const runs = new Map()
  const verifiers = new Map()
  const waiters = new Set()
  const signatures = { verified: 0, invalid: 0 }
  const runOf = (body) => {
    try {
      const callId = JSON.parse(body).data.call_id
      return callId.slice(0, callId.lastIndexOf("_c"))
    } catch {
      return "?"
    }
  }
  const server = createServer((req, res) => {
    const chunks = []
    req.on("data", (c) => chunks.push(c))
    req.on("end", () => {
      const at = performance.now()
      const body = Buffer.concat(chunks).toString("utf8")
      const verifier = verifiers.get(new URL(req.url, "http://receiver").pathname)
      if (verifier) {
        try {
          verifier.verify(body, req.headers)
          signatures.verified++
        } catch {
          signatures.invalid++
        }
      }
      const run = runOf(body)
      let entry = runs.get(run)
      if (!entry) runs.set(run, (entry = { ids: new Set(), arrivals: [], requests: 0, firstAt: at, lastNewAt: 0 }))
      entry.requests++
      const id = req.headers["webhook-id"] ?? ""
      if (!entry.ids.has(id)) {
        entry.ids.add(id)
        entry.arrivals.push(at)
        entry.lastNewAt = at
        for (const w of waiters) if (w.run === run && entry.ids.size >= w.n) w.resolve(at)
      }
      res.writeHead(200, { "content-type": "text/plain" })
      res.end("ok")
    })
  })
  server.keepAliveTimeout = 60_000
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve))
  const stats = (run) => {
    const entry = runs.get(run)
    return { distinct: entry?.ids.size ?? 0, requests: entry?.requests ?? 0, firstAt: entry?.firstAt, arrivals: entry?.arrivals ?? [] }
  }
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    verify: (path, secret) => void verifiers.set(path, new Webhook(secret)),
    stats,
    signatures,
    /** Resolves with the `performance.now()` at which the run's n-th distinct webhook-id arrived. */
    waitFor: (run, n, timeoutMs) =>
      new Promise((resolve, reject) => {
        const entry = runs.get(run)
        if (entry && entry.ids.size >= n) return resolve(entry.lastNewAt)
        const waiter = {
          run, n,
          resolve: (at) => (clearTimeout(timer), waiters.delete(waiter), resolve(at))
        }
        const timer = setTimeout(() => (waiters.delete(waiter), reject(new Error(`timed out waiting for ${n} deliveries of ${run}: ${JSON.stringify(stats(run))}`))), timeoutMs)
        waiters.add(waiter)
      }),
    close: () => new Promise((resolve) => (server.closeAllConnections?.(), server.close(resolve)))
  }
}
