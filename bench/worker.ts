/**
 * The benchmark Worker: the example platform, plus two consumers to compare
 * it with, on the same runtime:
 * - `bench-bare`: the floor — one multi-row INSERT per batch into one table, no framework;
 * - `bench-naive`: the consumer of seed 003 — per message SELECT processed_events,
 *   handle (INSERT the outcome), INSERT processed_events.
 * `/bench/*` routes drive the runs and read progress; `/bench/roundtrips`
 * pushes synthetic 100-message batches through each stage with counting
 * wrappers around the real bindings. Used only by `npm run bench`.
 */
import { makePlatform, type PlatformEnv } from "@factline/workers"
import { FactId, FactMessage } from "@factline/core"
import type { Fact } from "@factline/schemas"
import { calls } from "../apps/example/src/calls/Calls.js"

import { LedgerShard as BaseLedgerShard } from "@factline/workers"
import * as CountingBindings from "@factline/core/testing"

const platform = makePlatform([calls])

interface BenchEnv extends PlatformEnv {
  readonly BENCH_BARE: Queue
  readonly BENCH_NAIVE: Queue
}

const tables = [
  "CREATE TABLE IF NOT EXISTS bench_bare (id TEXT PRIMARY KEY, body TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS processed_events (event_id TEXT PRIMARY KEY, type TEXT NOT NULL, source TEXT, processed_at TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS naive_outcomes (call_id TEXT PRIMARY KEY, run TEXT NOT NULL, body TEXT NOT NULL)"
]

interface BenchMessage {
  readonly run: string
  readonly event_id: string
  readonly type: string
  readonly source: string
  readonly payload: Record<string, unknown>
}

// ---- the two baselines ------------------------------------------------------------------------

const bare = async (batch: MessageBatch<BenchMessage>, env: BenchEnv) => {
  const rows = batch.messages.map((m) => [m.body.event_id, JSON.stringify(m.body)])
  const statements: Array<D1PreparedStatement> = []
  for (let i = 0; i < rows.length; i += 50) {
    const chunk = rows.slice(i, i + 50)
    statements.push(env.DB.prepare(`INSERT OR IGNORE INTO bench_bare (id, body) VALUES ${chunk.map(() => "(?, ?)").join(", ")}`).bind(...chunk.flat()))
  }
  await env.DB.batch(statements)
  batch.ackAll()
}

/** Seed 003, "Pattern 1: The Idempotent Consumer", verbatim in shape. */
const naive = async (batch: MessageBatch<BenchMessage>, env: BenchEnv) => {
  for (const msg of batch.messages) {
    const { event_id, type } = msg.body
    const existing = await env.DB.prepare("SELECT event_id FROM processed_events WHERE event_id = ?").bind(event_id).first()
    if (existing) {
      msg.ack()
      continue
    }
    try {
      await env.DB.prepare("INSERT OR IGNORE INTO naive_outcomes (call_id, run, body) VALUES (?, ?, ?)")
        .bind(msg.body.payload.call_id, msg.body.run, JSON.stringify(msg.body.payload)).run()
      await env.DB.prepare(`INSERT OR IGNORE INTO processed_events (event_id, type, source, processed_at) VALUES (?, ?, ?, datetime('now'))`)
        .bind(event_id, type, msg.body.source).run()
      msg.ack()
    } catch {
      msg.retry({ delaySeconds: Math.min(30 * Math.pow(2, msg.attempts - 1), 600) })
    }
  }
}

// ---- instrumentation ----------------------------------------------------------------------------

const zero = (): CountingBindings.Counts => CountingBindings.make()
const instrument = (env: BenchEnv, counts: CountingBindings.Counts): BenchEnv => CountingBindings.env(env, counts)

/** Queue sends made by the shards' inline relay (same isolate locally): counted here, reset per stage. */
const relayCounts = CountingBindings.make()
export class LedgerShard extends BaseLedgerShard {
  constructor(ctx: DurableObjectState, env: PlatformEnv) {
    super(ctx, CountingBindings.env(env, relayCounts))
  }
}

/** A MessageBatch like the runtime's, for driving one consumer call in-process. */
const syntheticBatch = <B>(queue: string, bodies: ReadonlyArray<B>) => {
  const outcome = { acked: 0, retried: 0 }
  const messages = bodies.map((body, i) => ({
    id: `synthetic-${i}`, timestamp: new Date(), attempts: 1, body,
    ack: () => void outcome.acked++, retry: () => void outcome.retried++
  }))
  return { batch: { queue, messages, ackAll: () => undefined, retryAll: () => undefined, metadata: {} } as unknown as MessageBatch<B>, outcome }
}

// ---- drivers ----------------------------------------------------------------------------------

export const callEvent = (run: string, i: number) => {
  const call_id = `${run}_c${i}`
  return {
    schema_version: 2,
    message_type: "call.completed",
    idempotency_key: `call.completed:${call_id}`,
    tenant_id: "tenant-a",
    subject: call_id,
    source: "bench",
    message_id: `m_${call_id}`,
    correlation_id: call_id,
    created_at: new Date().toISOString(),
    payload: { call_id, buyer_id: `${run}_b${i % 50}`, duration_s: (i * 37) % 180, price_cents: 100 + ((i * 53) % 900), currency: "USD" }
  }
}

const benchMessage = (run: string, i: number): BenchMessage => {
  const e = callEvent(run, i)
  return { run, event_id: e.idempotency_key, type: e.message_type, source: e.source, payload: e.payload }
}

const sendAll = async (queue: Queue, bodies: ReadonlyArray<unknown>) => {
  for (let i = 0; i < bodies.length; i += 100) {
    await queue.sendBatch(bodies.slice(i, i + 100).map((body) => ({ body, contentType: "json" as const })))
  }
}

const json = (value: unknown, status = 200) => new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json" } })

const roundTrips = async (env: BenchEnv, run: string) => {
  const stage = async (name: string, queue: string, bodies: ReadonlyArray<unknown>, call: (batch: MessageBatch<unknown>, env: BenchEnv) => Promise<void>) => {
    const counts = zero()
    relayCounts.queueSends = 0
    relayCounts.queueMessages = 0
    const { batch, outcome } = syntheticBatch(queue, bodies)
    const started = Date.now()
    await call(batch, instrument(env, counts))
    const { shards: _, ...figures } = counts
    return {
      stage: name, messages: bodies.length, ...figures,
      queueSends: counts.queueSends + relayCounts.queueSends, queueMessages: counts.queueMessages + relayCounts.queueMessages,
      ...outcome, ms: Date.now() - started
    }
  }
  const size = 100
  const events = Array.from({ length: size }, (_, i) => callEvent(`${run}rt`, i))
  const facts: Array<Fact> = await Promise.all(events.map(async (e, i) => ({
    fact_id: await FactId.make({ tenantId: "tenant-a", cause: e.idempotency_key, decidedBy: "bench", position: 0 }),
    tenant_id: "tenant-a", stream: e.subject, sequence: 1, type: "outcome", data: e.payload,
    causation_id: e.idempotency_key, correlation_id: e.correlation_id, caused_by: "bench", created_at: new Date(Date.now() + i).toISOString()
  })))
  const charges: Array<Fact> = await Promise.all(events.map(async (e, i) => ({
    ...facts[i]!, fact_id: await FactId.make({ tenantId: "tenant-a", cause: e.idempotency_key, decidedBy: "bench", position: 2 }),
    sequence: 3, type: "charge", data: { call_id: e.payload.call_id, buyer_id: e.payload.buyer_id, amount_cents: e.payload.price_cents, currency: "USD" }
  })))
  const rows = []
  rows.push(await stage("events", "factline-events", events, (b, e) => platform.queue(b, e, undefined as never)))
  rows.push(await stage("fact-processing", "factline-fact-processing", facts.map((f) => FactMessage.make(f)), (b, e) => platform.queue(b, e, undefined as never)))
  rows.push(await stage("projections", "factline-projections", [...facts.slice(0, 50), ...charges.slice(0, 50)].map((f) => FactMessage.make(f)), (b, e) => platform.queue(b, e, undefined as never)))
  rows.push(await stage("naive (seed 003)", "bench-naive", Array.from({ length: size }, (_, i) => benchMessage(`${run}rt`, i)), (b, e) => naive(b as MessageBatch<BenchMessage>, e)))
  rows.push(await stage("bare", "bench-bare", Array.from({ length: size }, (_, i) => benchMessage(`${run}rt`, i)), (b, e) => bare(b as MessageBatch<BenchMessage>, e)))
  return rows
}

export default {
  async fetch(request: Request, env: BenchEnv, ctx: ExecutionContext) {
    const url = new URL(request.url)
    if (!url.pathname.startsWith("/bench/")) return platform.fetch(request, env, ctx)
    const run = url.searchParams.get("run") ?? "r"
    const n = Number(url.searchParams.get("n") ?? "0")
    const from = Number(url.searchParams.get("from") ?? "0")
    switch (url.pathname) {
      case "/bench/setup":
        await env.DB.batch(tables.map((t) => env.DB.prepare(t)))
        return json({ ok: true })
      case "/bench/send": {
        const target = url.searchParams.get("queue")
        const ids = Array.from({ length: n }, (_, i) => from + i)
        if (target === "bare") await sendAll(env.BENCH_BARE, ids.map((i) => benchMessage(run, i)))
        else if (target === "naive") await sendAll(env.BENCH_NAIVE, ids.map((i) => benchMessage(run, i)))
        else if (target === "events") await sendAll(env.EVENTS_QUEUE, ids.map((i) => callEvent(run, i)))
        else return json({ error: "queue must be bare, naive or events" }, 400)
        return json({ sent: n })
      }
      case "/bench/progress": {
        const [bareRows, naiveRows, events, budgets] = await env.DB.batch([
          env.DB.prepare("SELECT COUNT(*) AS n FROM bench_bare WHERE id LIKE ?").bind(`call.completed:${run}_%`),
          env.DB.prepare("SELECT COUNT(*) AS n FROM naive_outcomes WHERE run = ?").bind(run),
          env.DB.prepare("SELECT COUNT(*) AS n FROM inbox WHERE queue = 'factline-events' AND idempotency_key LIKE ? AND status = 'succeeded'").bind(`tenant-a/call.completed:${run}_%`),
          env.DB.prepare("SELECT COALESCE(SUM(spent_cents), 0) AS spent, COALESCE(SUM(charges), 0) AS charges FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id LIKE ?").bind(`${run}_b%`)
        ])
        return json({
          bare: (bareRows!.results[0] as any).n,
          naive: (naiveRows!.results[0] as any).n,
          events: (events!.results[0] as any).n,
          spent_cents: (budgets!.results[0] as any).spent,
          charges: (budgets!.results[0] as any).charges
        })
      }
      case "/bench/roundtrips":
        return json(await roundTrips(env, run))
      default:
        return json({ error: "unknown bench route" }, 404)
    }
  },
  async queue(batch: MessageBatch<unknown>, env: BenchEnv, ctx: ExecutionContext) {
    if (batch.queue === "bench-bare") return bare(batch as MessageBatch<BenchMessage>, env)
    if (batch.queue === "bench-naive") return naive(batch as MessageBatch<BenchMessage>, env)
    return platform.queue(batch, env, ctx)
  },
  scheduled: platform.scheduled
}
