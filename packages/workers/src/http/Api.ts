/**
 * The HTTP API (DESIGN.md "HTTP API"): ingest events, read ledger streams.
 *
 * Every route authenticates (Auth.ts) and is scoped to the token's tenant: a
 * tenant can neither write into nor read from another tenant's data (batch
 * records included). Starting a rebuild, which replays every tenant's facts,
 * takes the `platform` scope, never a tenant's `admin`. Bad input
 * is a 4xx with a JSON error naming every problem; anything unexpected is a
 * 500 with a generic message — never a stack, SQL text or a secret.
 */
import { Effect } from "effect"
import { Hono } from "hono"
import { AsyncApi, BatchConsumer, BatchFiles, BatchJobs, Export, Import, Reconcile, Ledger, Producer, Projection, ProjectionQuery, ProjectionStore, Rebuild, type Registry } from "@factline/core"
import type { PlatformEnv } from "../Env.js"
import type { PlatformRuntime, PlatformServices } from "../Services.js"
import type { AuthVariables } from "./Auth.js"
import { authenticate } from "./Routes.js"
import * as Batches from "./Batches.js"
import * as CloudEvents from "./CloudEvents.js"
import * as Dashboard from "./Dashboard.js"
import { errorResponse } from "./Errors.js"
import * as JsonBody from "./JsonBody.js"
import * as Operations from "./Operations.js"
import * as Traceparent from "./Traceparent.js"
import * as Webhooks from "./Webhooks.js"
import { strictQuery } from "./StrictQuery.js"
import { Issues } from "@factline/schemas"

export const maxBodyBytes = 5 * 1024 * 1024
export const maxEventsPerRequest = 1_000

export { authenticate, publicRoutes, type Route, routes } from "./Routes.js"

type AppEnv = { Bindings: PlatformEnv; Variables: AuthVariables }

const unavailable = (c: Parameters<typeof errorResponse>[0], what: string) => {
  console.error(`${what} is unavailable`)
  return errorResponse(c, 503, "unavailable", `${what} is unavailable, retry later`, undefined, { "retry-after": "5" })
}

/** What a JSON route reads; `POST /v1/events` also takes the CloudEvents types. */
const jsonContentTypes = ["application/json"]
const eventContentTypes = ["application/json", "application/cloudevents+json", "application/cloudevents-batch+json"]

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

const intParam = (value: string | undefined, name: string, min: number, max: number, fallback: number): number | string => {
  if (value === undefined || value === "") return fallback
  if (!/^\d+$/.test(value)) return `${name} must be a whole number`
  const n = Number(value)
  return n < min || n > max ? `${name} must be between ${min} and ${max}` : n
}

export const make = (router: Registry.Shape, runtime: (env: PlatformEnv) => PlatformRuntime) => {
  const app = new Hono<AppEnv>()
  const run = <A, E>(env: PlatformEnv, program: Effect.Effect<A, E, PlatformServices>) => runtime(env).runPromise(Effect.result(program))

  const query = (env: PlatformEnv, page: ProjectionQuery.Page) =>
    run(env, Effect.flatMap(Effect.service(ProjectionStore.ProjectionStore), (store) => store.query<Record<string, unknown>>(page.sql)))

  /**
   * Reads a JSON body within `maxBodyBytes` (counted while streaming), or the error response.
   * A body of another content type (`text/plain`, a form, none) is a 415, before anything is read.
   */
  const readBody = async (c: Parameters<typeof errorResponse>[0], contentTypes: ReadonlyArray<string> = jsonContentTypes) => {
    const contentType = (c.req.header("content-type") ?? "").split(";")[0]!.trim().toLowerCase()
    if (!contentTypes.includes(contentType)) {
      return {
        ok: false as const,
        response: errorResponse(
          c,
          415,
          "unsupported_media_type",
          `content-type must be ${contentTypes.join(" or ")}; got ${contentType === "" ? "none" : JSON.stringify(contentType.slice(0, 100))}`
        )
      }
    }
    const read = await JsonBody.read(c.req.raw, maxBodyBytes)
    if (read._tag === "Ok") return { ok: true as const, body: read.value }
    const { status, code, message, details } = read.refusal
    return { ok: false as const, response: errorResponse(c, status, code, message, details) }
  }

  app.post("/v1/events", authenticate("POST /v1/events"), async (c) => {
    const principal = c.get("principal")
    const trace = Traceparent.ofRequest(c.req.raw.headers)
    if (!trace.ok) return errorResponse(c, 400, "invalid_request", trace.message, { problems: trace.problems })
    const read = await readBody(c, eventContentTypes)
    if (!read.ok) return read.response
    const body = read.body
    const cloudEvents = CloudEvents.mode(c.req.header("content-type"), c.req.raw.headers)
    let batch: boolean
    let list: unknown
    if (cloudEvents) {
      const events = cloudEvents === "batch" ? body : [cloudEvents === "binary" ? CloudEvents.fromBinary(c.req.raw.headers, body) : body]
      if (!Array.isArray(events) || events.length === 0) return errorResponse(c, 400, "invalid_request", "a CloudEvents batch must be a non-empty JSON array")
      batch = cloudEvents === "batch"
      const mapped = events.map((event) => CloudEvents.toEnvelope(event, router.definitions))
      const problems = mapped.flatMap((m, i) => m.problems.map((p) => ({ ...p, path: [batch ? `events.${i}` : "", p.path].filter(Boolean).join(".") })))
      if (problems.length > 0) return errorResponse(c, 400, "invalid_events", `${problems.length} problem(s); nothing was accepted`, { problems })
      list = mapped.map((m) => m.input)
    } else {
      if (!isObject(body)) return errorResponse(c, 400, "invalid_request", 'send one envelope object or { "events": [...] }')
      batch = "events" in body
      list = batch ? body.events : [body]
    }
    if (!Array.isArray(list) || list.length === 0) return errorResponse(c, 400, "invalid_request", '"events" must be a non-empty array')
    if (list.length > maxEventsPerRequest) {
      return errorResponse(c, 400, "too_many_events", `at most ${maxEventsPerRequest} events per request; got ${list.length}`)
    }
    // Tenant comes from the token: defaulted when absent, refused when it names another tenant.
    const foreign: Array<{ path: string; message: string }> = []
    const inputs = list.map((event, index) => {
      if (!isObject(event)) return event
      if (event.tenant_id !== undefined && event.tenant_id !== principal.tenantId) {
        foreign.push({ path: batch ? `events.${index}.tenant_id` : "tenant_id", message: "this token cannot write events for another tenant" })
      }
      return { tenant_id: principal.tenantId, source: "http", traceparent: trace.traceparent, ...event }
    })
    if (foreign.length > 0) return errorResponse(c, 403, "forbidden", "events for another tenant", { problems: foreign })

    const result = await run(c.env, Effect.flatMap(Effect.service(Producer.Producer), (p) => p.accept(inputs, { pathPrefix: batch ? "events" : undefined })))
    if (result._tag === "Success") {
      const items = result.success
      const replay = items.every((item) => item.duplicate)
      return c.json(
        {
          accepted: items.length,
          idempotency_keys: items.map((item) => item.envelope.idempotency_key),
          items: items.map((item) => ({ idempotency_key: item.envelope.idempotency_key, duplicate: item.duplicate }))
        },
        202,
        { ...Traceparent.responseHeaders(trace.traceparent, items), ...(replay ? { "idempotent-replay": "true" } : {}) }
      )
    }
    const error = result.failure
    switch (error._tag) {
      case "InvalidMessages":
        return errorResponse(c, 400, "invalid_events", `${error.problems.length} problem(s); nothing was accepted`, { problems: error.problems })
      case "IdempotencyConflict":
        return errorResponse(
          c,
          422,
          "idempotency_conflict",
          `${error.conflicts.length} idempotency key(s) carry another payload than the one accepted under them (${error.conflicts.map((k) => JSON.stringify(k.idempotency_key)).join(", ")}); nothing was accepted`,
          error.conflicts
        )
      case "QueueSendFailed":
        console.error("ingest failed: QueueSendFailed")
        return errorResponse(
          c,
          503,
          "unavailable",
          error.sent.length === 0
            ? "the events queue is unavailable; nothing was sent, retry later"
            : `the events queue failed after ${error.sent.length} event(s) were sent; retry the request (sending again is safe by idempotency key)`,
          { sent: error.sent, not_sent: error.not_sent },
          { "retry-after": "5" }
        )
      case "AcceptedKeysUnavailable":
        console.error("ingest failed: AcceptedKeysUnavailable")
        return errorResponse(c, 503, "unavailable", "the idempotency store is unavailable; nothing was sent, retry later", undefined, { "retry-after": "5" })
      case "PayloadStoreUnavailable":
        console.error("ingest failed: PayloadStoreUnavailable")
        return errorResponse(c, 503, "unavailable", "the payload store is unavailable; nothing was sent, retry later", undefined, { "retry-after": "5" })
    }
  })

  app.get("/v1/streams/:subject/facts", authenticate("GET /v1/streams/:subject/facts"), strictQuery(["after", "limit"]), async (c) => {
    const principal = c.get("principal")
    const subject = c.req.param("subject")
    const after = intParam(c.req.query("after"), "after", 0, Number.MAX_SAFE_INTEGER, 0)
    const limit = intParam(c.req.query("limit"), "limit", 1, 1_000, 100)
    if (typeof after === "string" || typeof limit === "string") {
      return errorResponse(c, 400, "invalid_query", [after, limit].filter((v) => typeof v === "string").join("; "))
    }
    const result = await run(
      c.env,
      Effect.flatMap(Effect.service(Ledger.Ledger), (l) => l.read({ tenant_id: principal.tenantId, stream: subject }, { after, limit }))
    )
    if (result._tag === "Failure") {
      console.error(`stream read failed: ${result.failure._tag}`)
      return errorResponse(c, 503, "unavailable", "the ledger is unavailable, retry later", undefined, { "retry-after": "5" })
    }
    const state = result.success
    if (state.version === 0) return errorResponse(c, 404, "not_found", `no stream "${subject}" for this tenant`)
    const last = state.facts.at(-1)?.sequence
    if (CloudEvents.wantsBatch(c.req.header("accept"))) {
      // CloudEvents batch mode: a JSON array of events; the next page (if any) in a Link header.
      const next = last !== undefined && last < state.version ? `<${new URL(c.req.url).pathname}?after=${last}&limit=${limit}>; rel="next"` : undefined
      return c.body(JSON.stringify(state.facts.map(CloudEvents.fromFact)), 200, {
        "content-type": CloudEvents.batchContentType,
        ...(next ? { link: next } : {})
      })
    }
    return c.json({
      subject,
      version: state.version,
      facts: state.facts,
      next_after: last !== undefined && last < state.version ? last : null
    })
  })

  /**
   * The causation chain of a fact: back to the message that caused it, and forward to what it caused. Facts
   * of one chain share their stream (processors and webhook outcomes append to the parent's stream), so the
   * trace reads that one stream (`?subject=`, required: a fact id alone cannot be located without an index
   * on every fact) with one ledger call per stream page.
   */
  app.get("/v1/facts/:fact_id/trace", authenticate("GET /v1/facts/:fact_id/trace"), strictQuery(["subject"]), async (c) => {
    const tenant = c.get("principal").tenantId
    const factId = c.req.param("fact_id")
    const subject = c.req.query("subject")
    if (subject === undefined || subject === "") {
      return errorResponse(c, 400, "invalid_query", "subject is required: the stream that holds the fact (a causation chain stays in one stream)", {
        problems: [{ path: "subject", message: "is required" }]
      })
    }
    const result = await run(c.env, Effect.flatMap(Effect.service(Ledger.Ledger), (l) => l.readStreams([{ tenant_id: tenant, stream: subject }])))
    if (result._tag === "Failure") return unavailable(c, "the ledger")
    const facts = result.success[0]?.facts ?? []
    const byId = new Map(facts.map((f) => [f.fact_id, f]))
    const fact = byId.get(factId)
    if (!fact) return errorResponse(c, 404, "not_found", `no fact ${JSON.stringify(factId.slice(0, 100))} in stream ${JSON.stringify(subject.slice(0, 200))} for this tenant`)
    // Back: follow causation ids while they name facts of the stream; the last one names the message.
    const back = [fact]
    for (let cur = fact; byId.has(cur.causation_id) && back.length <= facts.length; ) {
      cur = byId.get(cur.causation_id)!
      back.unshift(cur)
    }
    const root = back[0]!.causation_id
    // Forward: everything caused by this fact, breadth first, with the fact that caused each.
    const children = new Map<string, Array<(typeof facts)[number]>>()
    for (const f of facts) children.set(f.causation_id, [...(children.get(f.causation_id) ?? []), f])
    const forward: Array<(typeof facts)[number] & { readonly depth: number }> = []
    const queue: Array<{ id: string; depth: number }> = [{ id: fact.fact_id, depth: 1 }]
    while (queue.length > 0 && forward.length < facts.length) {
      const { id, depth } = queue.shift()!
      for (const child of children.get(id) ?? []) {
        forward.push({ ...child, depth })
        queue.push({ id: child.fact_id, depth: depth + 1 })
      }
    }
    const accepted = await run(c.env, Effect.flatMap(Effect.service(ProjectionStore.ProjectionStore), (store) =>
      store.query<{ message_type: string; subject: string; accepted_at: string }>({
        sql: "SELECT message_type, subject, accepted_at FROM accepted_keys WHERE tenant_id = ? AND idempotency_key = ?",
        params: [tenant, root]
      })))
    return c.json({
      fact_id: fact.fact_id,
      subject,
      correlation_id: fact.correlation_id,
      traceparent: fact.traceparent ?? null,
      cause: {
        idempotency_key: root,
        message: accepted._tag === "Success" && accepted.success[0] ? accepted.success[0] : null
      },
      back,
      forward
    })
  })

  app.get("/v1/facts", authenticate("GET /v1/facts"), strictQuery(), async (c) => {
    const page = ProjectionQuery.facts(c.get("principal").tenantId, c.req.query())
    if (page._tag === "Failure") return errorResponse(c, 400, "invalid_query", Issues.render(page.failure), { problems: page.failure })
    const result = await query(c.env, page.success)
    if (result._tag === "Failure") return unavailable(c, "the facts store")
    const rows = result.success
    const data = rows.slice(0, page.success.limit).map(({ body, ...fact }) => ({ ...fact, data: JSON.parse(String(body)) }))
    const nextCursor = page.success.nextCursor(rows)
    if (CloudEvents.wantsBatch(c.req.header("accept"))) {
      const url = new URL(c.req.url)
      if (nextCursor !== null) url.searchParams.set("cursor", nextCursor)
      return c.body(JSON.stringify(data.map((f) => CloudEvents.fromFact(f as Parameters<typeof CloudEvents.fromFact>[0]))), 200, {
        "content-type": CloudEvents.batchContentType,
        ...(nextCursor !== null ? { link: `<${url.pathname}${url.search}>; rel="next"` } : {})
      })
    }
    return c.json({ data, next_cursor: nextCursor })
  })

  app.get("/v1/projections/:name", authenticate("GET /v1/projections/:name"), strictQuery(), async (c) => {
    const projection = router.projection(c.req.param("name"))
    if (!projection) {
      return errorResponse(c, 404, "not_found", `no projection "${c.req.param("name")}" (known: ${router.projections.map((p) => p.name).join(", ")})`)
    }
    const page = ProjectionQuery.rows(projection, c.get("principal").tenantId, c.req.query())
    if (page._tag === "Failure") return errorResponse(c, 400, "invalid_query", Issues.render(page.failure), { problems: page.failure })
    const result = await query(c.env, page.success)
    if (result._tag === "Failure") return unavailable(c, "the projection store")
    const booleans = Projection.booleanColumns(projection)
    const rows = result.success
    return c.json({
      projection: projection.name,
      data: rows.slice(0, page.success.limit).map((row) => {
        const out: Record<string, unknown> = { ...row }
        for (const b of booleans) if (out[b] !== null && out[b] !== undefined) out[b] = out[b] === 1
        return out
      }),
      next_cursor: page.success.nextCursor(rows)
    })
  })

  /**
   * `POST /v1/batches`: starts a batch job. `rebuild` (scope `platform`: it replays every tenant's facts);
   * `import` (scope `admin`: into the caller's tenant) of up to 1,000 inline envelopes, written to R2 as
   * NDJSON under the tenant's prefix and run in chunks on `factline-batch`.
   */
  app.post("/v1/batches", authenticate("POST /v1/batches"), async (c) => {
    const principal = c.get("principal")
    const read = await readBody(c)
    if (!read.ok) return read.response
    const body = read.body
    const usage = 'send { "operation": "rebuild", "projection": "<name>" }, { "operation": "import", "events": [...] | "manifest": "<uploaded name>" }, { "operation": "export", "projection"?: "<name>", "format"?: "ndjson" | "csv" } (reconcile is not supported yet)'
    if (!isObject(body)) return errorResponse(c, 400, "invalid_request", usage)
    if (body.operation === "rebuild") {
      if (!principal.scopes.includes("platform")) return errorResponse(c, 403, "forbidden", 'a rebuild replays every tenant\'s facts: it takes the "platform" scope')
      if (typeof body.projection !== "string") return errorResponse(c, 400, "invalid_request", usage)
      return startRebuild(c, body.projection)
    }
    if (body.operation === "import" || body.operation === "export" || body.operation === "reconcile") {
      if (!principal.scopes.includes("admin")) return errorResponse(c, 403, "forbidden", `${body.operation} works on the token's tenant: it takes the "admin" scope`)
      return body.operation === "import" ? startImport(c, body) : body.operation === "export" ? startExport(c, body) : startReconcile(c, body)
    }
    return errorResponse(c, 400, "invalid_request", usage)
  })

  const startRebuild = async (c: Parameters<typeof errorResponse>[0], projection: string) => {
    const started = await run(c.env, Rebuild.start(projection, c.get("principal").tenantId))
    if (started._tag === "Failure") {
      const error = started.failure
      if (error._tag === "RebuildRefused") return errorResponse(c, error.code === "conflict" ? 409 : 404, error.code, error.message)
      return unavailable(c, "the projection store")
    }
    try {
      await c.env.BATCH_QUEUE.send(BatchConsumer.make(started.success.first), { contentType: "json" })
    } catch {
      return unavailable(c, "the batch queue")
    }
    return c.json({ batch_id: started.success.record.id, operation: "rebuild", ...started.success.record }, 202)
  }

  /** Queues a created job's first chunk; a send that fails ends the job `failed` (it would never run). */
  const enqueueFirst = async (c: Parameters<typeof errorResponse>[0], job: BatchJobs.Row, total: number) => {
    try {
      await c.env.BATCH_QUEUE.send(BatchConsumer.make({ batch_id: job.id, operation: job.operation, offset: 0, total }, job.tenant_id), { contentType: "json" })
    } catch {
      await run(c.env, BatchJobs.fail(job.id, "the batch queue was unavailable when the job was started", new Date().toISOString()))
      return unavailable(c, "the batch queue")
    }
    return c.json(BatchJobs.view(job), 202)
  }

  const startReconcile = async (c: Parameters<typeof errorResponse>[0], body: Record<string, unknown>) => {
    const extra = Object.keys(body).filter((k) => !["operation", "projection", "repair"].includes(k))
    if (extra.length > 0) return errorResponse(c, 400, "invalid_request", `unknown field(s) ${extra.map((k) => JSON.stringify(k.slice(0, 50))).join(", ")}`)
    if (body.repair !== undefined && typeof body.repair !== "boolean") return errorResponse(c, 400, "invalid_request", '"repair" must be true or false')
    if (typeof body.projection !== "string") return errorResponse(c, 400, "invalid_request", '"projection" must be a projection\'s name')
    const projection = router.projection(body.projection)
    if (!projection) return errorResponse(c, 404, "not_found", `no projection "${body.projection.slice(0, 100)}" (known: ${router.projections.map((p) => p.name).join(", ")})`)
    const params: Reconcile.Params = { projection: projection.name, repair: body.repair === true }
    const created = await run(c.env, BatchJobs.create({
      id: BatchJobs.newId(), tenantId: c.get("principal").tenantId, operation: "reconcile", params, inputKey: null, total: null, now: new Date().toISOString()
    }))
    if (created._tag === "Failure") return unavailable(c, "the batch store")
    return enqueueFirst(c, created.success, 0)
  }

  const startExport = async (c: Parameters<typeof errorResponse>[0], body: Record<string, unknown>) => {
    const extra = Object.keys(body).filter((k) => !["operation", "projection", "format"].includes(k))
    if (extra.length > 0) return errorResponse(c, 400, "invalid_request", `unknown field(s) ${extra.map((k) => JSON.stringify(k.slice(0, 50))).join(", ")}`)
    const format = body.format ?? "ndjson"
    if (format !== "ndjson" && format !== "csv") return errorResponse(c, 400, "invalid_request", '"format" must be "ndjson" or "csv"')
    if (body.projection !== undefined && typeof body.projection !== "string") return errorResponse(c, 400, "invalid_request", '"projection" must be a projection\'s name')
    const projection = body.projection === undefined ? undefined : router.projection(body.projection)
    if (body.projection !== undefined && !projection) {
      return errorResponse(c, 404, "not_found", `no projection "${String(body.projection).slice(0, 100)}" (known: ${router.projections.map((p) => p.name).join(", ")})`)
    }
    if (projection === undefined && format === "csv") return errorResponse(c, 400, "invalid_request", "facts export as NDJSON only (their data is nested); CSV is for a projection")
    const params: Export.Params = { ...(projection ? { projection: projection.name } : {}), format }
    const created = await run(c.env, BatchJobs.create({
      id: BatchJobs.newId(), tenantId: c.get("principal").tenantId, operation: "export", params, inputKey: null, total: null, now: new Date().toISOString()
    }))
    if (created._tag === "Failure") return unavailable(c, "the batch store")
    return enqueueFirst(c, created.success, 0)
  }

  const startManifestImport = async (c: Parameters<typeof errorResponse>[0], manifest: unknown) => {
    const tenantId = c.get("principal").tenantId
    if (typeof manifest !== "string" || !Batches.uploadName.test(manifest)) {
      return errorResponse(c, 400, "invalid_request", '"manifest" must be the name of a file uploaded with PUT /v1/batches/uploads/:name')
    }
    const key = Batches.uploadKey(tenantId, manifest)
    let exists: boolean
    try {
      exists = (await c.env.PAYLOADS.head(key)) !== null
    } catch {
      return unavailable(c, "the payload store")
    }
    if (!exists) return errorResponse(c, 404, "not_found", `no uploaded file "${manifest}"; upload it with PUT /v1/batches/uploads/${manifest}`)
    const created = await run(c.env, BatchJobs.create({
      id: BatchJobs.newId(), tenantId, operation: "import", params: { source: "manifest", manifest }, inputKey: key, total: null, now: new Date().toISOString()
    }))
    if (created._tag === "Failure") return unavailable(c, "the batch store")
    return enqueueFirst(c, created.success, 0)
  }

  const startImport = async (c: Parameters<typeof errorResponse>[0], body: Record<string, unknown>) => {
    const tenantId = c.get("principal").tenantId
    const events = body.events
    const extra = Object.keys(body).filter((k) => k !== "operation" && k !== "events" && k !== "manifest")
    if (extra.length > 0 || ("events" in body && "manifest" in body)) {
      return errorResponse(c, 400, "invalid_request", `send { "operation": "import", "events": [...] } or { "operation": "import", "manifest": "<uploaded name>" }${extra.length > 0 ? `; unknown field(s) ${extra.map((k) => JSON.stringify(k.slice(0, 50))).join(", ")}` : ""}`)
    }
    if ("manifest" in body) return startManifestImport(c, body.manifest)
    if (!Array.isArray(events) || events.length === 0) return errorResponse(c, 400, "invalid_request", '"events" must be a non-empty array of envelopes')
    if (events.length > Import.maxInlineEvents) {
      return errorResponse(c, 400, "too_many_events", `at most ${Import.maxInlineEvents} events per inline import; got ${events.length}`)
    }
    // One line per event, whatever it is: lines that are not envelopes are reported by the job with their number.
    const ndjson = events.map((event) => JSON.stringify(event)).join("\n") + "\n"
    const id = BatchJobs.newId()
    const key = BatchJobs.inputKey(tenantId, id)
    const now = new Date().toISOString()
    const created = await run(c.env, Effect.gen(function*() {
      const files = yield* BatchFiles.BatchFiles
      yield* files.put(key, ndjson)
      return yield* BatchJobs.create({ id, tenantId, operation: "import", params: { source: "inline" }, inputKey: key, total: events.length, now })
    }))
    if (created._tag === "Failure") return unavailable(c, created.failure._tag === "BatchFilesUnavailable" ? "the payload store" : "the batch store")
    return enqueueFirst(c, created.success, events.length)
  }

  // The AsyncAPI document of this platform's queues, messages and facts (public, like any API description).
  const asyncApi = JSON.stringify(AsyncApi.generate(router))
  app.get("/asyncapi.json", (c) => c.body(asyncApi, 200, { "content-type": "application/json", "cache-control": "public, max-age=300" }))

  Webhooks.mount(app, { registry: router, run, readBody: (c) => readBody(c) })
  Operations.mount(app, { run, readBody: (c) => readBody(c) })
  Batches.mount(app, { run })
  Batches.mountUploads(app)
  Dashboard.mount(app)

  app.notFound((c) => errorResponse(c, 404, "not_found", `no route for ${c.req.method} ${new URL(c.req.url).pathname}`))
  app.onError((error, c) => {
    console.error(`unhandled error: ${error instanceof Error ? error.name : "unknown"}`)
    return errorResponse(c, 500, "internal", "internal error")
  })
  return app
}
