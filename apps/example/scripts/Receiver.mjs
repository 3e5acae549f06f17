// A real HTTP webhook receiver for tests and the smoke run (Node): records every request and answers by the
// first word of the path's last segment, per webhook-id:
//   /hooks/ok-*        200
//   /hooks/fail2-*     500 to the first two attempts of each webhook-id, then 200
//   /hooks/retry30-*   429 with Retry-After: 30 to the first attempt, then 200
//   /hooks/gone-*      410 Gone
//   /hooks/fail-*      500 always, with a long body (the platform keeps 1 KiB of it)
//   /hooks/redirect-*  302 to another path (the platform must not follow it)
//   /hooks/slow-*      200 after 2 s (a slow receiver)
//   /hooks/paced-*     200 after 300 ms (to see how many requests are in flight at once)
// GET /received?path=/hooks/... lists what that path received: { at, answered_at, headers, body, status }.
import { createServer } from "node:http"

export const start = async (port = 0) => {
  const received = new Map()
  const seen = new Map()
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://receiver")
    if (req.method === "GET" && url.pathname === "/received") {
      res.writeHead(200, { "content-type": "application/json" })
      return res.end(JSON.stringify(received.get(url.searchParams.get("path")) ?? []))
    }
    const chunks = []
    req.on("data", (c) => chunks.push(c))
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      const id = req.headers["webhook-id"] ?? ""
      const attempt = (seen.get(`${url.pathname}|${id}`) ?? 0) + 1
      seen.set(`${url.pathname}|${id}`, attempt)
      const kind = url.pathname.split("/").at(-1).split("-")[0]
      let status = 200
      const headers = { "content-type": "text/plain" }
      let text = "ok"
      if (kind === "fail2" && attempt <= 2) (status = 500), (text = `failing attempt ${attempt}`)
      else if (kind === "retry30" && attempt === 1) (status = 429), (headers["retry-after"] = "30"), (text = "slow down")
      else if (kind === "gone") (status = 410), (text = "this endpoint is gone")
      else if (kind === "fail") (status = 500), (text = `internal error ${"x".repeat(3_000)}`)
      else if (kind === "redirect") (status = 302), (headers.location = "/hooks/ok-redirected"), (text = "moved")
      const entry = {
        at: new Date().toISOString(),
        headers: {
          "webhook-id": req.headers["webhook-id"], "webhook-timestamp": req.headers["webhook-timestamp"], "webhook-signature": req.headers["webhook-signature"],
          "content-type": req.headers["content-type"], traceparent: req.headers["traceparent"]
        },
        body,
        status
      }
      received.set(url.pathname, [...(received.get(url.pathname) ?? []), entry])
      const answer = () => ((entry.answered_at = new Date().toISOString()), res.writeHead(status, headers), res.end(text))
      if (kind === "slow") setTimeout(answer, 2_000)
      else if (kind === "paced") setTimeout(answer, 300)
      else answer()
    })
  })
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve))
  server.unref()
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) }
}
