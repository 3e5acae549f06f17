// A local stand-in for the CRM the crm-sync workflow writes to (tests, the chaos run and `npm run dev`): contacts,
// deals and notes over HTTP, deduplicated by Idempotency-Key as a real CRM API does (a repeated key answers the
// first answer again and does nothing more), and failing on command, per call_id:
//   POST /control { call_id, operation: "contacts" | "deals" | "notes" | "delete", status, times }
//     the next `times` calls of that operation for that call answer `status` (503: transient, 422: permanent;
//     times: null for every call)
//   POST /control { call_prefix, fail_rate, lost_rate, status, max_per_key }
//     random transient failures for every call whose call_id starts with call_prefix (the chaos run): a request
//     answers `status` without doing anything with probability fail_rate, or does its effect and then answers
//     `status` anyway (the reply lost: a retry with the same key gets the first answer) with probability
//     lost_rate — at most max_per_key such failures per idempotency key (default 2), so that a retried step gets
//     through within its retries; a later /control with the same prefix and rates of 0 ends it
//   GET /state?call_id=…  → { requests: [{ operation, key, status }], effects: [{ operation, key, id }] }
//     every request seen (each attempt), and every effect done (once per key)
//   POST /contacts {call_id} → 201 {id}; DELETE /contacts/:id → 200 {id}; POST /deals, POST /notes → 201 {id}
import { createServer } from "node:http"

export const start = async (port = 0) => {
  const requests = new Map()
  const effects = new Map()
  const answers = new Map()
  const failures = new Map()
  /** Random failure modes by call_id prefix, and how many random failures each idempotency key has had. */
  const randoms = new Map()
  const randomFailures = new Map()
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
      if (req.method === "POST" && url.pathname === "/control" && typeof body.call_prefix === "string") {
        randoms.set(body.call_prefix, { failRate: body.fail_rate ?? 0, lostRate: body.lost_rate ?? 0, status: body.status ?? 503, maxPerKey: body.max_per_key ?? 2 })
        return json(200, { ok: true })
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
      const random = [...randoms].find(([prefix]) => callId.startsWith(prefix))?.[1]
      const draw = Math.random()
      const randomly = random !== undefined && (randomFailures.get(key) ?? 0) < random.maxPerKey
        ? draw < random.failRate ? "refused" : draw < random.failRate + random.lostRate ? "lost" : undefined
        : undefined
      if (randomly !== undefined) randomFailures.set(key, (randomFailures.get(key) ?? 0) + 1)
      if (randomly === "refused") {
        seen.push({ operation, key, status: random.status, random: "refused" })
        return json(random.status, { error: "the CRM is busy (random)" })
      }
      const answered = answers.get(key)
      if (answered !== undefined) {
        seen.push({ operation, key, status: answered.status, repeated: true })
        return json(answered.status, answered.body)
      }
      const id = operation === "delete" ? url.pathname.split("/")[2] : `${operation.slice(0, 1)}_${next++}`
      const answer = { status: operation === "delete" ? 200 : 201, body: { id } }
      answers.set(key, answer)
      effects.set(callId, [...(effects.get(callId) ?? []), { operation, key, id }])
      if (randomly === "lost") {
        seen.push({ operation, key, status: random.status, random: "lost" })
        return json(random.status, { error: "the CRM did it, but its answer was lost (random)" })
      }
      seen.push({ operation, key, status: answer.status })
      return json(answer.status, answer.body)
    })
  })
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve))
  server.unref()
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) }
}
