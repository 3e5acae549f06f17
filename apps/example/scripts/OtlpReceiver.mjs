// A local OTLP/HTTP collector for tests (Node): records the spans exported to `<url>/<any prefix>/v1/traces`
// as OTLP/JSON (`application/json`, what factline's exporter sends), flattened one object per span:
//   { traceId, spanId, parentSpanId, name, kind, attributes: { key: value }, links: [{ traceId, spanId }], service, prefix }
// A protobuf body (`application/x-protobuf`) is answered 415: this receiver reads JSON only.
// GET /spans?prefix=/run-1 lists the spans exported under that prefix (GET /spans?trace_id=… those of one trace,
// whatever the prefix); GET /exports?prefix=/run-1 the export
// requests' header names and authorization (to check the configured headers arrive), without bodies.
import { createServer } from "node:http"

/** An OTLP AnyValue as a plain value. */
const valueOf = (v) =>
  v === undefined || v === null ? undefined
  : "stringValue" in v ? v.stringValue
  : "intValue" in v ? Number(v.intValue)
  : "doubleValue" in v ? v.doubleValue
  : "boolValue" in v ? v.boolValue
  : "arrayValue" in v ? (v.arrayValue.values ?? []).map(valueOf)
  : undefined
const attributesOf = (list) => Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]))

export const start = async (port = 0) => {
  const spans = []
  const exports = []
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://otlp")
    const prefix = url.searchParams.get("prefix") ?? ""
    if (req.method === "GET" && (url.pathname === "/spans" || url.pathname === "/exports")) {
      res.writeHead(200, { "content-type": "application/json" })
      const traceId = url.searchParams.get("trace_id")
      const list = url.pathname === "/spans" ? spans : exports
      return res.end(JSON.stringify(list.filter((s) => (traceId === null ? s.prefix === prefix : s.traceId === traceId))))
    }
    const chunks = []
    req.on("data", (c) => chunks.push(c))
    req.on("end", () => {
      if (req.method !== "POST" || !url.pathname.endsWith("/v1/traces")) return void (res.writeHead(404), res.end())
      if (!String(req.headers["content-type"] ?? "").startsWith("application/json")) return void (res.writeHead(415), res.end("OTLP/JSON only"))
      let body
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      } catch {
        return void (res.writeHead(400), res.end("not JSON"))
      }
      const at = url.pathname.slice(0, -"/v1/traces".length)
      exports.push({ prefix: at, headerNames: Object.keys(req.headers), authorization: req.headers.authorization })
      for (const resource of body.resourceSpans ?? []) {
        const service = attributesOf(resource.resource?.attributes)["service.name"]
        for (const scope of resource.scopeSpans ?? []) {
          for (const s of scope.spans ?? []) {
            spans.push({
              prefix: at, service, traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId, name: s.name, kind: s.kind,
              attributes: attributesOf(s.attributes), links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId }))
            })
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end("{}")
    })
  })
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve))
  server.unref()
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) }
}
