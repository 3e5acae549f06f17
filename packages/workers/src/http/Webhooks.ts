/**
 * The webhooks HTTP API (scope `admin`, within the token's tenant; the
 * catalog with any authenticated token):
 *
 * - `GET /v1/webhooks/event-types` — the catalog: event types, their fact type, a JSON Schema of each payload.
 * - `POST /v1/webhooks/endpoints` `{ url, event_types | fact_types, description? }` → 201 with the
 *   `whsec_…` secret — the only time it is shown.
 * - `GET /v1/webhooks/endpoints[/:id]`, `PATCH …/:id` (url, types, description, enabled), `DELETE …/:id`.
 * - `POST …/:id/rotate-secret` → the new secret, once; the old one keeps signing for 24 h.
 * - `GET …/:id/attempts?limit=&cursor=` — the delivery log, newest first.
 * - `POST …/:id/recover` `{ since }` — re-sends every failed delivery since then.
 *
 * Another tenant's endpoint is the same 404 as a missing one. Secrets are
 * never logged and never returned after creation or rotation.
 */
import { Effect } from "effect"
import type { Hono } from "hono"
import { QueueProducer, RetryPolicy, type Registry, SendBatches, Webhook, WebhookStore } from "@factline/core"
import type { PlatformEnv } from "../Env.js"
import type { PlatformServices } from "../Services.js"
import type { AuthVariables } from "./Auth.js"
import { authenticate } from "./Routes.js"
import { errorResponse } from "./Errors.js"
import { strictQuery } from "./StrictQuery.js"

type AppEnv = { Bindings: PlatformEnv; Variables: AuthVariables }
type Ctx = Parameters<typeof errorResponse>[0]

export interface Deps {
  readonly registry: Registry.Shape
  readonly run: <A, E>(env: PlatformEnv, program: Effect.Effect<A, E, PlatformServices>) => Promise<{ readonly _tag: "Success"; readonly success: A } | { readonly _tag: "Failure"; readonly failure: E }>
  readonly readBody: (c: Ctx) => Promise<{ readonly ok: true; readonly body: unknown } | { readonly ok: false; readonly response: Response }>
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** Maps the store's typed failures to the API's error shape; nothing internal leaks. */
const failure = (c: Ctx, error: { readonly _tag: string; readonly message: string; readonly problems?: ReadonlyArray<unknown> }) => {
  switch (error._tag) {
    case "WebhookInputError":
      return errorResponse(c, 400, "invalid_request", error.message, { problems: error.problems })
    case "WebhookNotFound":
      return errorResponse(c, 404, "not_found", error.message)
    case "WebhookConflict":
      return errorResponse(c, 409, "conflict", error.message)
    case "SecretsKeyError":
      console.error("webhooks: the secrets key is missing or invalid")
      return errorResponse(c, 503, "unavailable", "webhook secrets cannot be used: the platform's secrets key is not configured", undefined, { "retry-after": "60" })
    default:
      console.error(`webhooks: store unavailable (${error._tag})`)
      return errorResponse(c, 503, "unavailable", "the webhook store is unavailable, retry later", undefined, { "retry-after": "5" })
  }
}

const store = Effect.service(WebhookStore.WebhookStore)

export const mount = (app: Hono<AppEnv>, deps: Deps) => {
  const { run, readBody, registry } = deps
  const catalog = [...registry.webhookEvents.values()].map((e) => ({
    type: e.type,
    fact_type: e.fact.type,
    description: e.description ?? null,
    schema: Webhook.jsonSchema(e)
  }))

  app.get("/v1/webhooks/event-types", authenticate("GET /v1/webhooks/event-types"), strictQuery([]), (c) => c.json({ data: catalog }))

  app.post("/v1/webhooks/endpoints", authenticate("POST /v1/webhooks/endpoints"), strictQuery([]), async (c) => {
    const read = await readBody(c)
    if (!read.ok) return read.response
    if (!isObject(read.body)) return errorResponse(c, 400, "invalid_request", 'send { "url": "https://…", "event_types": ["…"] } (or "fact_types")')
    const tenant = c.get("principal").tenantId
    const result = await run(c.env, Effect.flatMap(store, (s) => s.create(tenant, read.body as WebhookStore.Input)))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json({ ...result.success.endpoint, secret: result.success.secret }, 201)
  })

  app.get("/v1/webhooks/endpoints", authenticate("GET /v1/webhooks/endpoints"), strictQuery([]), async (c) => {
    const result = await run(c.env, Effect.flatMap(store, (s) => s.list(c.get("principal").tenantId)))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json({ data: result.success })
  })

  app.get("/v1/webhooks/endpoints/:id", authenticate("GET /v1/webhooks/endpoints/:id"), strictQuery([]), async (c) => {
    const result = await run(c.env, Effect.flatMap(store, (s) => s.get(c.get("principal").tenantId, c.req.param("id"))))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json(result.success)
  })

  app.patch("/v1/webhooks/endpoints/:id", authenticate("PATCH /v1/webhooks/endpoints/:id"), strictQuery([]), async (c) => {
    const read = await readBody(c)
    if (!read.ok) return read.response
    if (!isObject(read.body) || Object.keys(read.body).length === 0) {
      return errorResponse(c, 400, "invalid_request", "send the fields to change: url, event_types or fact_types, description, enabled")
    }
    const result = await run(c.env, Effect.flatMap(store, (s) => s.update(c.get("principal").tenantId, c.req.param("id"), read.body as WebhookStore.Input)))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json(result.success)
  })

  app.delete("/v1/webhooks/endpoints/:id", authenticate("DELETE /v1/webhooks/endpoints/:id"), strictQuery([]), async (c) => {
    const result = await run(c.env, Effect.flatMap(store, (s) => s.remove(c.get("principal").tenantId, c.req.param("id"))))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.body(null, 204)
  })

  app.post("/v1/webhooks/endpoints/:id/rotate-secret", authenticate("POST /v1/webhooks/endpoints/:id/rotate-secret"), strictQuery([]), async (c) => {
    const result = await run(c.env, Effect.flatMap(store, (s) => s.rotate(c.get("principal").tenantId, c.req.param("id"))))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json({ ...result.success.endpoint, secret: result.success.secret })
  })

  app.get("/v1/webhooks/endpoints/:id/attempts", authenticate("GET /v1/webhooks/endpoints/:id/attempts"), strictQuery(["limit", "cursor"]), async (c) => {
    const raw = c.req.query("limit")
    const limit = raw === undefined ? 50 : /^\d+$/.test(raw) ? Number(raw) : NaN
    if (!(limit >= 1 && limit <= 100)) return errorResponse(c, 400, "invalid_query", "limit must be a whole number from 1 to 100")
    const cursor = c.req.query("cursor")
    const result = await run(c.env, Effect.flatMap(store, (s) => s.attempts(c.get("principal").tenantId, c.req.param("id"), cursor === undefined ? { limit } : { before: cursor, limit })))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json(result.success)
  })

  app.post("/v1/webhooks/endpoints/:id/recover", authenticate("POST /v1/webhooks/endpoints/:id/recover"), strictQuery([]), async (c) => {
    const read = await readBody(c)
    if (!read.ok) return read.response
    const since = isObject(read.body) ? read.body.since : undefined
    if (typeof since !== "string" || Number.isNaN(Date.parse(since)) || !/^\d{4}-\d{2}-\d{2}T/.test(since)) {
      return errorResponse(c, 400, "invalid_request", 'send { "since": "<ISO 8601 time>" }: failed deliveries since then are sent again', { problems: [{ path: "since", message: "must be an ISO 8601 time" }] })
    }
    const tenant = c.get("principal").tenantId
    const result = await run(c.env, Effect.gen(function*() {
      const s = yield* store
      const messages = yield* s.recover(tenant, c.req.param("id"), new Date(since).toISOString())
      const queue = yield* QueueProducer.QueueProducer
      for (const chunk of SendBatches.split(messages)) yield* queue.sendBatch(RetryPolicy.webhooks.queue, chunk)
      return messages.length
    }))
    if (result._tag === "Failure") {
      if (result.failure._tag === "QueueSendFailed") return errorResponse(c, 503, "unavailable", "the webhooks queue is unavailable; retry the recovery (re-sending is safe)", undefined, { "retry-after": "5" })
      return failure(c, result.failure)
    }
    return c.json({ recovered: result.success, since: new Date(since).toISOString() }, 202)
  })
}
