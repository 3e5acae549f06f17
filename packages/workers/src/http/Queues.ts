/**
 * `GET /v1/queues/health?window=1h` (scope `platform`: the queues are shared by every tenant): the five
 * queues graded against their thresholds — throughput, retries, dead letters, depth, lag — and the ledger's
 * relay backlog.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import type { Hono } from "hono"
import { Failure, Metrics, RetryPolicy } from "@factline/core"
import { queueBinding } from "../Services.js"
import { type AppEnv, bind, describe, Json, oneOf, problems } from "./Contract.js"

const windows: Record<string, number> = { "15m": 15, "1h": 60, "6h": 360, "24h": 1_440 }
const Status = Schema.Literals(["ok", "warning", "critical"])

export const health = HttpApiEndpoint.get("queueHealth", "/v1/queues/health", {
  query: { window: oneOf(["15m", "1h", "6h", "24h"], "default 1h") },
  success: Schema.Struct({
    window: Schema.String,
    since: Schema.String,
    status: Status,
    thresholds: Json,
    queues: Schema.Array(Schema.StructWithRest(Schema.Struct({ queue: Schema.String, status: Status }), [Json])).annotate({
      description: "Per queue: received, acked, retried, dead-lettered, retry rate, open dead letters by reason, depth, lag p50/p99, processing p99, a per-minute series"
    }),
    ledger: Schema.Struct({ relay_pending_shards: Schema.Int })
  }),
  error: problems(400, 503)
}).pipe(describe({ summary: "Queue health", scopes: ["platform"], errors: { 400: "`invalid_query`: an unknown window", 503: "`unavailable`: the metrics store; retry" } }))

export const group = HttpApiGroup.make("queues").add(health)
  .annotateMerge(OpenApi.annotations({
    title: "Queues",
    description: "The platform's queues graded against their thresholds."
  }))

export const mount = (app: Hono<AppEnv>) => {
  bind(app, health, async (c) => {
    // One of `windows` when given: checked against the description before the handler runs.
    const window = c.req.query("window") ?? "1h"
    const minutes = windows[window]!
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
    } catch (cause) {
      throw Failure.unavailable("the metrics store")(cause)
    }
  })
}
