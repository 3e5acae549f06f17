/**
 * The operators' HTTP API: dead letters and queue health.
 *
 * Dead letters (scope `admin` — a tenant's own records only — or `platform`, every tenant's):
 * `GET /v1/dlq?queue=&status=&type=&reason=&cursor=&limit=`, `GET /v1/dlq/:id`,
 * `POST /v1/dlq/:id/replay`, `POST /v1/dlq/replay` (bulk, by the same filters),
 * `POST /v1/dlq/:id/skip {"reason"}` (appends a `reconciliation` fact), `POST /v1/dlq/:id/escalate {"note"?}`.
 * Health (scope `platform`: the queues are shared by every tenant): `GET /v1/queues/health?window=1h`.
 */
import { Effect } from "effect"
import type { Hono } from "hono"
import { DeadLetterStore, FactId, Ledger, Metrics, PlatformFacts, RetryPolicy } from "@factline/core"
import { TraceContext } from "@factline/schemas"
import type { PlatformEnv } from "../Env.js"
import { queueBinding } from "../Services.js"
import type { PlatformServices } from "../Services.js"
import type { AuthVariables, Principal } from "./Auth.js"
import { authenticate } from "./Routes.js"
import { errorResponse } from "./Errors.js"
import { strictQuery } from "./StrictQuery.js"

type AppEnv = { Bindings: PlatformEnv; Variables: AuthVariables }
type Ctx = Parameters<typeof errorResponse>[0]

export interface Deps {
  readonly run: <A, E>(env: PlatformEnv, program: Effect.Effect<A, E, PlatformServices>) => Promise<{ readonly _tag: "Success"; readonly success: A } | { readonly _tag: "Failure"; readonly failure: E }>
  readonly readBody: (c: Ctx) => Promise<{ readonly ok: true; readonly body: unknown } | { readonly ok: false; readonly response: Response }>
}

const scopeOf = (p: Principal): DeadLetterStore.Scope => ({
  tenantId: p.scopes.includes("platform") ? null : p.tenantId,
  actor: p.name ?? `token of ${p.tenantId}`
})

const failure = (c: Ctx, error: { readonly _tag: string; readonly message: string; readonly problems?: ReadonlyArray<unknown> }) => {
  switch (error._tag) {
    case "DeadLetterInputError":
      return errorResponse(c, 400, "invalid_query", error.message, { problems: error.problems })
    case "DeadLetterNotFound":
      return errorResponse(c, 404, "not_found", error.message)
    case "DeadLetterConflict":
      return errorResponse(c, 409, "conflict", error.message)
    case "QueueSendFailed":
      return errorResponse(c, 503, "unavailable", "the source queue refused the replay; the record is open again, retry", undefined, { "retry-after": "5" })
    default:
      console.error(`operations: store unavailable (${error._tag})`)
      return errorResponse(c, 503, "unavailable", "the dead-letter store is unavailable, retry later", undefined, { "retry-after": "5" })
  }
}

const store = Effect.service(DeadLetterStore.DeadLetterStore)
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

const filtersOf = (c: Ctx, defaultStatus?: DeadLetterStore.Status) => {
  const q = (name: string) => c.req.query(name)
  return DeadLetterStore.validateFilters({ queue: q("queue"), status: q("status"), type: q("type"), reason: q("reason") }, defaultStatus)
}

const windows: Record<string, number> = { "15m": 15, "1h": 60, "6h": 360, "24h": 1_440 }

export const mount = (app: Hono<AppEnv>, deps: Deps) => {
  const { run, readBody } = deps

  app.get("/v1/dlq", authenticate("GET /v1/dlq"), strictQuery(["queue", "status", "type", "reason", "cursor", "limit"]), async (c) => {
    const filters = filtersOf(c)
    if (!filters.ok) return errorResponse(c, 400, "invalid_query", filters.problems.map((p) => `${p.path}: ${p.message}`).join("; "), { problems: filters.problems })
    const raw = c.req.query("limit")
    const limit = raw === undefined ? 50 : /^\d+$/.test(raw) ? Number(raw) : NaN
    if (!(limit >= 1 && limit <= 200)) return errorResponse(c, 400, "invalid_query", "limit must be a whole number from 1 to 200")
    const cursor = c.req.query("cursor")
    const result = await run(c.env, Effect.flatMap(store, (s) => s.list(scopeOf(c.get("principal")), filters.filters, cursor === undefined ? { limit } : { cursor, limit })))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json(result.success)
  })

  app.post("/v1/dlq/replay", authenticate("POST /v1/dlq/replay"), strictQuery(["queue", "type", "reason"]), async (c) => {
    const filters = filtersOf(c)
    if (!filters.ok) return errorResponse(c, 400, "invalid_query", filters.problems.map((p) => `${p.path}: ${p.message}`).join("; "), { problems: filters.problems })
    const result = await run(c.env, Effect.flatMap(store, (s) => s.replayMatching(scopeOf(c.get("principal")), filters.filters)))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json({ ...result.success, wave_size: DeadLetterStore.waveSize, wave_delay_seconds: DeadLetterStore.waveDelaySeconds }, 202)
  })

  app.get("/v1/dlq/:id", authenticate("GET /v1/dlq/:id"), strictQuery([]), async (c) => {
    const result = await run(c.env, Effect.flatMap(store, (s) => s.get(scopeOf(c.get("principal")), c.req.param("id"))))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json(result.success)
  })

  app.post("/v1/dlq/:id/replay", authenticate("POST /v1/dlq/:id/replay"), strictQuery([]), async (c) => {
    const result = await run(c.env, Effect.flatMap(store, (s) => s.replay(scopeOf(c.get("principal")), c.req.param("id"))))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json(result.success, 202)
  })

  app.post("/v1/dlq/:id/skip", authenticate("POST /v1/dlq/:id/skip"), strictQuery([]), async (c) => {
    const read = await readBody(c)
    if (!read.ok) return read.response
    const reason = isObject(read.body) ? read.body.reason : undefined
    if (typeof reason !== "string" || reason.trim() === "" || reason.length > 1_000) {
      return errorResponse(c, 400, "invalid_request", 'send { "reason": "why this work is given up" } (1 to 1,000 characters)', { problems: [{ path: "reason", message: "is required, 1 to 1,000 characters" }] })
    }
    const scope = scopeOf(c.get("principal"))
    const result = await run(c.env, Effect.gen(function*() {
      const s = yield* store
      const record = yield* s.resolve(scope, c.req.param("id"), "skipped", reason)
      // The decision goes into the ledger: a reconciliation fact in the original message's stream.
      const tenant = record.tenant_id ?? c.get("principal").tenantId
      const stream = record.subject ?? `dead-letters/${record.id}`
      const fact_id = yield* Effect.promise(() => FactId.make({ tenantId: tenant, cause: `dlq:${record.id}`, decidedBy: "factline-operations", position: 0 }))
      const ledger = yield* Ledger.Ledger
      yield* ledger.append([{
        tenant_id: tenant,
        stream,
        facts: [{
          fact_id,
          type: PlatformFacts.Reconciliation.type,
          data: {
            action: "dead_letter_skipped", dead_letter_id: record.id, queue: record.queue, failure_reason: record.reason,
            idempotency_key: record.idempotency_key, message_type: record.message_type, note: reason, by: scope.actor
          },
          causation_id: record.idempotency_key ?? record.id,
          correlation_id: record.idempotency_key ?? record.id,
          caused_by: "factline-operations",
          created_at: new Date().toISOString(),
          // The dead-lettered message's trace (a new parent-id: the operator's decision), or a new trace.
          traceparent: TraceContext.child((record.original_message as { readonly traceparent?: string } | null)?.traceparent)
        }]
      }])
      return { ...record, reconciliation_fact_id: fact_id }
    }))
    if (result._tag === "Failure") {
      if (result.failure._tag === "LedgerUnavailable") return errorResponse(c, 503, "unavailable", "the record is skipped but its reconciliation fact could not be appended; retry the skip", undefined, { "retry-after": "5" })
      return failure(c, result.failure)
    }
    return c.json(result.success)
  })

  app.post("/v1/dlq/:id/escalate", authenticate("POST /v1/dlq/:id/escalate"), strictQuery([]), async (c) => {
    let note = ""
    if ((c.req.header("content-length") ?? "0") !== "0" || c.req.header("content-type")) {
      const read = await readBody(c)
      if (!read.ok) return read.response
      const given = isObject(read.body) ? read.body.note : undefined
      if (given !== undefined && (typeof given !== "string" || given.length > 1_000)) return errorResponse(c, 400, "invalid_request", "note must be a string of at most 1,000 characters")
      note = (given as string | undefined) ?? ""
    }
    const result = await run(c.env, Effect.flatMap(store, (s) => s.resolve(scopeOf(c.get("principal")), c.req.param("id"), "escalated", note)))
    if (result._tag === "Failure") return failure(c, result.failure)
    return c.json(result.success)
  })

  app.get("/v1/queues/health", authenticate("GET /v1/queues/health"), strictQuery(["window"]), async (c) => {
    const window = c.req.query("window") ?? "1h"
    const minutes = windows[window]
    if (minutes === undefined) return errorResponse(c, 400, "invalid_query", `window must be one of ${Object.keys(windows).join(", ")}`)
    const since = new Date(Date.now() - minutes * 60_000).toISOString()
    const db = c.env.DB
    try {
      const [rollup, open, reasons, pending] = await db.batch([
        db.prepare("SELECT * FROM queue_metrics WHERE minute >= ? ORDER BY minute").bind(new Date(Math.floor(Date.parse(since) / 60_000) * 60_000).toISOString()),
        db.prepare("SELECT queue, COUNT(*) AS n FROM dead_messages WHERE status = 'open' GROUP BY queue"),
        db.prepare("SELECT queue, reason, COUNT(*) AS n FROM dead_messages WHERE received_at >= ? GROUP BY queue, reason").bind(since),
        db.prepare("SELECT COUNT(*) AS n FROM ledger_shards WHERE relay_pending_since IS NOT NULL")
      ])
      const byReason = new Map<string, Record<string, number>>()
      for (const r of (reasons!.results as Array<{ queue: string; reason: string; n: number }>)) byReason.set(r.queue, { ...(byReason.get(r.queue) ?? {}), [r.reason]: r.n })
      const binding = queueBinding(c.env)
      const depths = new Map(await Promise.all(RetryPolicy.all.map(async (p) => {
        try {
          return [p.queue, (await binding(p.queue)?.metrics())?.backlogCount ?? null] as const
        } catch {
          return [p.queue, null] as const
        }
      })))
      const queues = Metrics.health(
        RetryPolicy.all,
        rollup!.results as unknown as ReadonlyArray<Metrics.RollupRow>,
        new Map((open!.results as Array<{ queue: string; n: number }>).map((r) => [r.queue, r.n])),
        byReason,
        depths
      )
      const pendingShards = (pending!.results[0] as { n: number } | undefined)?.n ?? 0
      const levels = queues.map((q) => q.status)
      return c.json({
        window,
        since,
        status: levels.includes("critical") ? "critical" : levels.includes("warning") || pendingShards > 0 ? "warning" : "ok",
        thresholds: Metrics.thresholds,
        queues,
        ledger: { relay_pending_shards: pendingShards }
      })
    } catch {
      console.error("health: D1 unavailable")
      return errorResponse(c, 503, "unavailable", "the metrics store is unavailable, retry later", undefined, { "retry-after": "5" })
    }
  })
}
