#!/usr/bin/env node
// Interop with the official tools, against the real local stack (`wrangler dev`, started as the smoke run does):
// - AsyncAPI: the served GET /asyncapi.json parses with @asyncapi/parser without an error diagnostic
//   (warnings and infos are printed);
// - CloudEvents in: events built and serialized by the `cloudevents` SDK (structured, binary and batch mode)
//   are accepted by POST /v1/events;
// - CloudEvents out: the facts they caused, read back with `Accept: application/cloudevents-batch+json` from
//   GET /v1/streams/:subject/facts and GET /v1/facts, parse with the SDK (`HTTP.toEvent`, which validates each
//   element; and `new CloudEvent(obj)`, strict), and every attribute is the documented mapping of its fact.
// Exits non-zero on any failed check. Part of `npm test`.
import { Parser } from "@asyncapi/parser"
import { CloudEvent, HTTP } from "cloudevents"
import { isDeepStrictEqual } from "node:util"
import { checks, sleep } from "./LocalStack.mjs"


/** `f()`'s value, or the error it threw (the SDK throws a ValidationError with `errors`). */
const attempt = (f) => {
  try {
    return { value: f() }
  } catch (error) {
    return { error: `${error?.message ?? error}${error?.errors ? ` ${JSON.stringify(error.errors)}` : ""}` }
  }
}

/** RFC 3339 `date-time` (CloudEvents' Timestamp): full date, `T`, full time, optional fraction, required offset. */
const rfc3339 = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/
/** The context attributes (and `data`) every fact's CloudEvent has, and factline's extension attributes. */
const core = ["specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"]
const extensions = ["sequence", "causationid", "correlationid", "causedby", "tenantid", "schemaversion"]
const tenant = "tenant-a"

await checks("interop", async ({ base, check }) => {
  const get = (path, headers = {}) => fetch(`${base}${path}`, { headers: { authorization: "Bearer dev-token-tenant-a", ...headers } })

  // --- AsyncAPI: the served document, parsed by the official parser.
  const served = await fetch(`${base}/asyncapi.json`)
  const text = await served.text()
  const { document, diagnostics } = await new Parser().parse(text)
  const severity = ["error", "warning", "info", "hint"]
  const listed = diagnostics.map((d) => `${severity[d.severity]} ${d.code} ${d.path.join("/") || "(root)"}: ${d.message}`)
  for (const line of listed.filter((l) => !l.startsWith("error"))) console.log(`  asyncapi ${line}`)
  check("GET /asyncapi.json parses with @asyncapi/parser without an error diagnostic",
    served.status === 200 && document !== undefined && listed.every((l) => !l.startsWith("error")),
    `${served.status}: ${listed.filter((l) => l.startsWith("error")).join("; ")}`)
  const raw = JSON.parse(text)
  check("the parsed document has every channel, operation and message of the served one", document !== undefined &&
    isDeepStrictEqual(document.channels().all().map((c) => c.id()).sort(), Object.keys(raw.channels).sort()) &&
    isDeepStrictEqual(document.operations().all().map((o) => o.id()).sort(), Object.keys(raw.operations).sort()) &&
    isDeepStrictEqual(document.allMessages().all().map((m) => m.id()).sort(), Object.keys(raw.components.messages).sort()),
    JSON.stringify(document?.allMessages().all().map((m) => m.id())))

  // --- CloudEvents in: events the SDK builds, in each HTTP mode (the SDK's structured and binary; batch per the spec).
  const run = Date.now().toString(36)
  const source = "/interop/billing"
  // A qualifying call (outcome, qualification, charge); the example's handler wants subject = call_id.
  const call = (id, { subject = `interop_${run}_${id}`, ...extra } = {}) => new CloudEvent({
    type: "call.completed", source, id: `evt-${run}-${id}`, subject, schemaversion: 2, ...extra,
    data: { call_id: subject, buyer_id: `interop_${run}`, duration_s: 90, price_cents: 150, currency: "USD" }
  })
  // A subject with characters a URI must escape (the `source` out percent-encodes it).
  const odd = call("odd", { subject: `interop ${run}/ü:#?` })
  const sent = { structured: call("s", { correlationid: `corr-${run}` }), binary: call("b"), batch: [call("x"), call("y"), odd] }
  const post = async ({ headers, body }) => {
    const response = await fetch(`${base}/v1/events`, { method: "POST", headers: { authorization: "Bearer dev-token-tenant-a", ...headers }, body })
    return { status: response.status, body: await response.json() }
  }
  const structured = await post(HTTP.structured(sent.structured))
  check("POST /v1/events accepts a CloudEvent in the SDK's structured mode (202)", structured.status === 202 && structured.body.accepted === 1, JSON.stringify(structured))
  const binary = await post(HTTP.binary(sent.binary))
  check("POST /v1/events accepts a CloudEvent in the SDK's binary mode (202)", binary.status === 202 && binary.body.accepted === 1, JSON.stringify(binary))
  const batch = await post({ headers: { "content-type": "application/cloudevents-batch+json" }, body: JSON.stringify(sent.batch.map((e) => e.toJSON())) })
  check("POST /v1/events accepts a batch of SDK CloudEvents (202)", batch.status === 202 && batch.body.accepted === 3, JSON.stringify(batch))

  const factsOf = async (subject) => {
    for (let i = 0; i < 600; i++) {
      const page = await (await get(`/v1/facts?subject=${encodeURIComponent(subject)}&limit=100`)).json()
      if (page.data?.length === 3) return page.data
      await sleep(100)
    }
    throw new Error(`the facts of ${JSON.stringify(subject)} did not appear`)
  }
  const facts = new Map()
  for (const event of [sent.structured, sent.binary, ...sent.batch]) facts.set(event.subject, await factsOf(event.subject))
  /** factline's JSON of a stream (the ledger's fact shape, in sequence order). */
  const streamOf = async (subject) => (await (await get(`/v1/streams/${encodeURIComponent(subject)}/facts`)).json()).facts

  // --- CloudEvents out: parsed by the SDK, and mapped as documented.
  const asCloudEvents = async (path) => {
    const response = await get(path, { accept: "application/cloudevents-batch+json" })
    const body = await response.text()
    const headers = Object.fromEntries(response.headers)
    return { status: response.status, headers, raw: JSON.parse(body), parsed: attempt(() => HTTP.toEvent({ headers, body })) }
  }
  /** Every way one served CloudEvent differs from the documented mapping of its fact (the ledger's JSON of it). */
  const problemsOf = (event, fact) => {
    const problems = []
    const expect = (name, ok) => ok || problems.push(name)
    // `traceparent` (the distributed-tracing extension) when the fact has one: every fact written since trace context.
    const expected = [...core, ...extensions, ...(typeof fact.traceparent === "string" ? ["traceparent"] : [])]
    expect(`attributes ${Object.keys(event)}`, isDeepStrictEqual(Object.keys(event).sort(), expected.sort()))
    expect("traceparent = the fact's W3C trace context", event.traceparent === (fact.traceparent ?? undefined) && /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/.test(event.traceparent ?? ""))
    expect("attribute names: lower-case letters and digits, at most 20", Object.keys(event).every((k) => /^[a-z0-9]{1,20}$/.test(k)))
    expect("specversion", event.specversion === "1.0")
    expect("id = fact_id", event.id === fact.fact_id)
    expect("source = /factline/tenants/<tenant>/streams/<stream>", event.source === `/factline/tenants/${encodeURIComponent(tenant)}/streams/${encodeURIComponent(fact.stream)}`)
    expect("source is a URI-reference with nothing left to escape", /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]+$/.test(event.source) && !/%(?![0-9A-F]{2})/.test(event.source))
    expect("type", event.type === fact.type)
    expect("subject = stream", event.subject === fact.stream)
    expect("time = created_at", event.time === fact.created_at)
    expect(`time is RFC 3339 (${event.time})`, rfc3339.test(event.time))
    expect("datacontenttype", event.datacontenttype === "application/json")
    expect("data", isDeepStrictEqual(event.data, fact.data))
    expect(`sequence is the Sequence extension's string, zero-padded to 20 digits (${JSON.stringify(event.sequence)})`,
      typeof event.sequence === "string" && /^\d{20}$/.test(event.sequence) && Number(event.sequence) === fact.sequence)
    expect("causationid", event.causationid === fact.causation_id)
    expect("correlationid", event.correlationid === fact.correlation_id)
    expect("causedby", event.causedby === fact.caused_by)
    expect("tenantid", event.tenantid === tenant)
    expect("schemaversion = the fact's schema_version, as a string", event.schemaversion === String(fact.schema_version ?? 1))
    expect("every extension value is a non-empty string", extensions.every((k) => typeof event[k] === "string" && event[k] !== ""))
    const strict = attempt(() => new CloudEvent(event))
    expect(`new CloudEvent(obj) validates: ${strict.error}`, strict.error === undefined)
    return problems
  }
  const checkBatch = (name, answer, expected) => {
    check(`${name}: 200, content-type application/cloudevents-batch+json`, answer.status === 200 && answer.headers["content-type"] === "application/cloudevents-batch+json",
      `${answer.status} ${answer.headers["content-type"]}`)
    const events = answer.parsed.value
    check(`${name}: HTTP.toEvent parses the batch, every element validated`, Array.isArray(events) && events.length === expected.length &&
      events.every((e) => e instanceof CloudEvent && e.validate() === true), answer.parsed.error ?? `${events?.length} events`)
    const byId = new Map(expected.map((f) => [f.fact_id, f]))
    const problems = answer.raw.flatMap((event) => problemsOf(event, byId.get(event.id) ?? {}).map((p) => `${event.id}: ${p}`))
    check(`${name}: each event is its fact, mapped as documented`, answer.raw.length === expected.length && problems.length === 0, problems.join("; "))
    // What a consumer using the SDK reads is what was served.
    const same = Array.isArray(events) && events.every((e, i) => [...core, ...extensions].every((k) => isDeepStrictEqual(e[k], answer.raw[i][k])))
    check(`${name}: the SDK's events carry the served attributes unchanged`, same, JSON.stringify(events?.[0]))
  }

  const stream = await streamOf(sent.structured.subject)
  const out = await asCloudEvents(`/v1/streams/${encodeURIComponent(sent.structured.subject)}/facts`)
  checkBatch("GET /v1/streams/:subject/facts as CloudEvents", out, stream)
  // /v1/facts lists facts in another shape than the stream's (`subject`, no tenant): the same mapping; a subject that needs escaping.
  checkBatch("GET /v1/facts?subject=… as CloudEvents", await asCloudEvents(`/v1/facts?subject=${encodeURIComponent(odd.subject)}&limit=100`),
    await streamOf(odd.subject))

  // Causal links through CloudEvents in and out, and `sequence` ordering a stream by string comparison.
  check("the correlationid sent with the CloudEvent in comes back on every fact out", out.raw.every((e) => e.correlationid === `corr-${run}`),
    JSON.stringify(out.raw.map((e) => e.correlationid)))
  check("the first fact's causationid is the inbound CloudEvent's idempotency key (ce:<source>:<id>)",
    out.raw[0]?.causationid === `ce:${encodeURIComponent(source)}:${encodeURIComponent(sent.structured.id)}`, out.raw[0]?.causationid)
  const sequences = out.raw.map((e) => e.sequence)
  check("`sequence` orders the stream by string comparison", sequences.length === 3 && new Set(sequences).size === 3 && isDeepStrictEqual([...sequences].sort(), sequences),
    JSON.stringify(sequences))

  // Paging: every page parses; following Link: rel="next" yields the stream once, in order.
  const seen = []
  let path = `/v1/streams/${sent.binary.subject}/facts?limit=1`
  for (let pages = 0; path !== undefined && pages < 10; pages++) {
    const page = await asCloudEvents(path)
    if (!Array.isArray(page.parsed.value)) break
    seen.push(...page.parsed.value.map((e) => e.id))
    path = page.headers.link ? page.headers.link.slice(1, page.headers.link.indexOf(">")) : undefined
  }
  check("paged CloudEvents (Link rel=next) parse page by page and cover the stream once, in order",
    isDeepStrictEqual(seen, (await streamOf(sent.binary.subject)).map((f) => f.fact_id)), JSON.stringify(seen))
})
