// A local stand-in for the CRM the crm-sync workflow writes to (tests, the chaos run and `npm run dev`): contacts,
// deals and notes over HTTP, deduplicated by Idempotency-Key as a real CRM API does (a repeated key answers the
// first answer again and does nothing more), and failing on command, per call_id:
//   POST /control { call_id, operation: "contacts" | "deals" | "notes" | "delete", status, times }
//     the next `times` calls of that operation for that call answer `status` (503: transient, 422: permanent;
//     times: null for every call)
//   GET /state?call_id=…  → { requests: [{ operation, key, status }], effects: [{ operation, key, id }] }
//     every request seen (each attempt), and every effect done (once per key)
//   POST /contacts {call_id} → 201 {id}; DELETE /contacts/:id → 200 {id}; POST /deals, POST /notes → 201 {id}
import { createServer } from "node:http"

export const start = async (port = 0) => {
  const requests = new Map()
  const effects = new Map()
  const answers = new Map()
  const failures = new Map()
  let next = 1
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://crm")
    const json = (status, body) => (res.writeHead(status, { "content-type": "application/json" }), res.end(JSON.stringify(body)))
    if (req.method === "GET" && url.pathname === "/state") {
      const callId = url.searchParams.get("call_id")
      return json(200, { requests: requests.get(callId) ?? [], effects: effects.get(callId) ?? [] })
    }
    const chunks = []
    req.on("data", (c) => chunks.push(c))
    req.on("end", () => {
      let body = {}
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}")
      } catch {
        return json(400, { error: "body is not JSON" })
      }
      if (req.method === "POST" && url.pathname === "/control") {
        failures.set(`${body.call_id}|${body.operation}`, { status: body.status, times: body.times ?? null })
        return json(200, { ok: true })
      }
      const operation = req.method === "DELETE" ? "delete" : url.pathname.split("/")[1]
      if (!["contacts", "deals", "notes", "delete"].includes(operation)) return json(404, { error: `no route ${req.method} ${url.pathname}` })
      const key = req.headers["idempotency-key"]
      const callId = body.call_id ?? "unknown"
      const seen = requests.get(callId) ?? []
      requests.set(callId, seen)
      if (typeof key !== "string" || key === "") {
        seen.push({ operation, key: null, status: 400 })
        return json(400, { error: "Idempotency-Key is required" })
      }
      const failure = failures.get(`${callId}|${operation}`)
      if (failure !== undefined && (failure.times === null || failure.times > 0)) {
        if (failure.times !== null) failure.times -= 1
        seen.push({ operation, key, status: failure.status })
        return json(failure.status, { error: failure.status >= 500 ? "the CRM is busy" : `the CRM refuses this ${operation.replace(/s$/, "")}` })
      }
      const answered = answers.get(key)
      if (answered !== undefined) {
        seen.push({ operation, key, status: answered.status, repeated: true })
        return json(answered.status, answered.body)
      }
      const id = operation === "delete" ? url.pathname.split("/")[2] : `${operation.slice(0, 1)}_${next++}`
      const answer = { status: operation === "delete" ? 200 : 201, body: { id } }
      answers.set(key, answer)
      seen.push({ operation, key, status: answer.status })
      effects.set(callId, [...(effects.get(callId) ?? []), { operation, key, id }])
      return json(answer.status, answer.body)
    })
  })
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve))
  server.unref()
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) }
}
