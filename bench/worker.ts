/**
 * The benchmark Worker: the example platform, plus the consumers it is compared
 * with, on the same runtime and — where a ratio is taken — the same consumer
 * settings (max_batch_size 100, max_batch_timeout 1 s, as factline-events):
 * - `bench-bare`: the floor — one multi-row INSERT per batch into one table, no framework;
 * - `bench-naive` / `bench-naive-seed`: the consumer of seed 003 — per message SELECT
 *   processed_events, INSERT the outcome, INSERT processed_events — at factline's settings
 *   and at seed 003's own (10 / 5 s);
 * - `bench-events`: factline's events consumer, isolated: its relay sends to `bench-sink`
 *   instead of the projections and fact-processing queues, so no downstream work competes;
 * - `bench-hand-events` → `bench-hand-facts`: the same topology written by hand — events queue →
 *   a D1 facts table (multi-row INSERT) → one fact message per batch (`sendBatch`) → derived
 *   facts and the budget table (multi-row, applied set) — with no framework, isolated (to the
 *   sink) or end to end.
 * - `factline-webhooks` (the platform's own queue and consumer, at its production settings) is fed
 *   `webhook.delivery` messages or fact messages of charges (fan-out included) for tenant-b, whose
 *   endpoint points at the bench's local receiver; `bench-hooks-bare` is its floor at the same
 *   settings — POST each message's body to the receiver, nothing else (no signing, no D1, no ledger).
 * `/bench/*` routes drive the runs and read progress; `/bench/roundtrips` pushes synthetic
 * batches through each stage with counting wrappers around the real bindings; `/bench/cpu` times
 * synthetic batches per stage and where their time goes (StageTiming.ts); `/bench/fresh` reads the
 * freshness runs' budgets. With `FACTLINE_BENCH_LATENCY=production` (`BENCH_PROFILE=production`) every
 * compared pipeline's bindings — the consumers', the HTTP edge's and the LedgerShard's own — wait the
 * production profile's latency (Latency.ts); the drivers' own reads and sends do not. Used only by
 * `npm run bench`.
 */
import { makePlatform, type PlatformEnv } from "@factline/workers"
import { AcceptedKeys, FactId, FactMessage, KeyReceipts, KeyRing, KeyStorage, QueueGroups, RetryPolicy, Shards, WebhookConsumer } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import { modules } from "../apps/example/src/modules.js"
import * as CountingBindings from "@factline/core/testing/bindings"
import { LedgerShard as PlatformLedgerShard } from "@factline/workers"
// The per-endpoint webhook limiter (wrangler.jsonc binds WEBHOOK_LIMITER): exported as the example exports it; no bench endpoint sets a limit.
export { EndpointLimiter } from "@factline/workers"
import * as Effect from "effect/Effect"
import * as Latency from "./Latency.js"
import * as StageTiming from "./StageTiming.js"
import * as WorkflowStep from "./WorkflowStep.js"
// The workflows binding's class (wrangler.jsonc's `workflows`): the platform's, timed and counted (WorkflowStep.ts).
export { FactlineWorkflow } from "./WorkflowStep.js"

/** The platform's LedgerShard, its own outgoing calls (relay sends, payload puts) under the bench's latency profile. */
export class LedgerShard extends PlatformLedgerShard {
  constructor(ctx: DurableObjectState, env: PlatformEnv) {
    super(ctx, Latency.env(env))
  }

  /**
   * Bench only (issue 39's "DO bytes per fact in the hot tier"): the shard's SQLite size (every table and index:
   * facts, outbox, timers, snapshots, meta) and the facts it holds, read by `/bench/storage` after the end-to-end run.
   */
  benchStorage(): { readonly bytes: number; readonly facts: number } {
    const facts = this.ctx.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM facts").one().n
    return { bytes: this.ctx.storage.sql.databaseSize, facts }
  }
}

// The example's modules but its crm module (the stages compare the call pipeline with its hand-written
// equivalent, which starts no CRM sync; a CRM sync's own cost is what the workflow pass measures), and the bench's
// `bench-steps` workflow (what a workflow step costs: WorkflowStep.ts).
const platform = makePlatform([...modules.filter((m) => m.name !== "crm"), WorkflowStep.benchModule])

interface BenchEnv extends PlatformEnv {
  readonly BENCH_BARE: Queue
  readonly BENCH_NAIVE: Queue
  readonly BENCH_NAIVE_SEED: Queue
  readonly BENCH_EVENTS: Queue
  readonly BENCH_SINK: Queue
  readonly BENCH_HAND_EVENTS: Queue
  readonly BENCH_HAND_FACTS: Queue
  readonly BENCH_HOOKS_BARE: Queue
  readonly BENCH_HOP: Queue
  readonly WEBHOOKS_QUEUE: Queue
  readonly FACTLINE_WORKFLOWS: Workflow
  /** BENCH_SLOW (bench/run.mjs): the baseline check's self-test, one stage of the per-stage budget made slower. */
  readonly BENCH_SLOW?: string
}

const tables = [
  "CREATE TABLE IF NOT EXISTS bench_bare (id TEXT PRIMARY KEY, body TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS processed_events (event_id TEXT PRIMARY KEY, type TEXT NOT NULL, source TEXT, processed_at TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS naive_outcomes (call_id TEXT PRIMARY KEY, run TEXT NOT NULL, body TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS bench_sink (run TEXT PRIMARY KEY, facts INTEGER NOT NULL)",
  // The hand-written topology: a facts table keyed like factline's ledger, an applied set, a budget table.
  "CREATE TABLE IF NOT EXISTS hand_facts (fact_id TEXT PRIMARY KEY, stream TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS hand_applied (fact_id TEXT PRIMARY KEY)",
  "CREATE TABLE IF NOT EXISTS hand_budgets (buyer_id TEXT PRIMARY KEY, spent_cents INTEGER NOT NULL, charges INTEGER NOT NULL)",
  WorkflowStep.hopTable
]

interface BenchMessage {
  readonly run: string
  readonly event_id: string
  readonly type: string
  readonly source: string
  readonly payload: { readonly call_id: string; readonly buyer_id: string; readonly duration_s: number; readonly price_cents: number; readonly currency: string }
  /** Hand-written stage only: send the facts to the sink instead of the next hop. */
  readonly isolated?: boolean
}

const runOf = (stream: string) => stream.slice(0, stream.lastIndexOf("_c"))

// ---- the baselines ----------------------------------------------------------------------------

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

/** Counts the facts that reach the sink, per run: one upsert per batch. */
const sink = async (batch: MessageBatch<any>, env: BenchEnv) => {
  const perRun = new Map<string, number>()
  for (const m of batch.messages) {
    const facts: ReadonlyArray<{ stream: string }> = m.body?.payload?.facts ?? (m.body?.payload?.fact ? [m.body.payload.fact] : m.body?.facts ?? [])
    for (const f of facts) perRun.set(runOf(f.stream), (perRun.get(runOf(f.stream)) ?? 0) + 1)
  }
  if (perRun.size > 0) {
    await env.DB.prepare(
      `INSERT INTO bench_sink (run, facts) SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?) WHERE true
       ON CONFLICT (run) DO UPDATE SET facts = bench_sink.facts + excluded.facts`
    ).bind(JSON.stringify([...perRun])).run()
  }
  batch.ackAll()
}

/** Hand-written hop 1: events → the facts table (one multi-row statement) → one fact message per batch. */
const handEvents = async (batch: MessageBatch<BenchMessage>, env: BenchEnv) => {
  const facts = batch.messages.map((m) => ({ fact_id: `o:${m.body.event_id}`, stream: m.body.payload.call_id, type: "outcome", data: m.body.payload }))
  await env.DB.prepare(
    `INSERT INTO hand_facts (fact_id, stream, type, body)
     SELECT json_extract(value, '$.fact_id'), json_extract(value, '$.stream'), json_extract(value, '$.type'), json(json_extract(value, '$.data'))
     FROM json_each(?) WHERE true ON CONFLICT (fact_id) DO NOTHING`
  ).bind(JSON.stringify(facts)).run()
  const isolated = batch.messages.filter((m) => m.body.isolated).length === batch.messages.length
  await (isolated ? env.BENCH_SINK : env.BENCH_HAND_FACTS).sendBatch([{ body: { facts }, contentType: "json" }])
  batch.ackAll()
}

/** Hand-written hop 2: derive qualification and charge, store them, add new charges to the budget table. */
const handFacts = async (batch: MessageBatch<{ facts: ReadonlyArray<{ fact_id: string; stream: string; data: BenchMessage["payload"] }> }>, env: BenchEnv) => {
  const derived = batch.messages.flatMap((m) => m.body.facts.flatMap((f) => {
    const qualified = f.data.duration_s >= 60
    return [
      { fact_id: `q:${f.fact_id}`, stream: f.stream, type: "qualification", data: { call_id: f.data.call_id, qualified } },
      ...(qualified ? [{ fact_id: `c:${f.fact_id}`, stream: f.stream, type: "charge", data: { buyer_id: f.data.buyer_id, amount_cents: f.data.price_cents } }] : [])
    ]
  }))
  const charges = JSON.stringify(derived.filter((d) => d.type === "charge"))
  await env.DB.batch([
    env.DB.prepare(
      `INSERT INTO hand_facts (fact_id, stream, type, body)
       SELECT json_extract(value, '$.fact_id'), json_extract(value, '$.stream'), json_extract(value, '$.type'), json(json_extract(value, '$.data'))
       FROM json_each(?) WHERE true ON CONFLICT (fact_id) DO NOTHING`
    ).bind(JSON.stringify(derived)),
    env.DB.prepare(
      `INSERT INTO hand_budgets (buyer_id, spent_cents, charges)
       SELECT json_extract(value, '$.data.buyer_id'), SUM(json_extract(value, '$.data.amount_cents')), COUNT(*) FROM json_each(?)
       WHERE NOT EXISTS (SELECT 1 FROM hand_applied a WHERE a.fact_id = json_extract(value, '$.fact_id')) GROUP BY 1
       ON CONFLICT (buyer_id) DO UPDATE SET spent_cents = hand_budgets.spent_cents + excluded.spent_cents, charges = hand_budgets.charges + excluded.charges`
    ).bind(charges),
    env.DB.prepare("INSERT INTO hand_applied (fact_id) SELECT json_extract(value, '$.fact_id') FROM json_each(?) WHERE true ON CONFLICT DO NOTHING").bind(charges)
  ])
  batch.ackAll()
}

// ---- webhooks ---------------------------------------------------------------------------------

/** The webhooks runs use their own tenant, so the other runs' charges (tenant-a) reach no endpoint. */
const webhookTenant = "tenant-b"

interface BenchEndpoint {
  readonly id: string
  readonly version: number
}

/** A charge of the webhooks tenant as the ledger stores it: a fact of a published type (`charge.created`). */
const chargeFact = async (run: string, i: number): Promise<Fact> => {
  const call_id = `${run}_c${i}`
  const cause = `call.completed:${call_id}`
  return {
    fact_id: await FactId.make({ tenantId: webhookTenant, cause, decidedBy: "bench", position: 3 }),
    tenant_id: webhookTenant, stream: call_id, sequence: 3, type: "charge",
    data: { call_id, buyer_id: `${run}_b${i % 50}`, amount_cents: 100 + ((i * 53) % 900), currency: "USD" },
    causation_id: cause, correlation_id: call_id, caused_by: "bench", created_at: new Date().toISOString()
  }
}

/** The `webhook.delivery` message the consumer's fan-out makes of this fact for this endpoint, field for field. */
const deliveryOf = async (fact: Fact, endpoint: BenchEndpoint) => {
  const id = await WebhookConsumer.deliveryId(fact.fact_id, endpoint.id)
  return {
    schema_version: 1, message_type: WebhookConsumer.deliveryMessageType, message_id: `msg_${id}`, idempotency_key: id,
    correlation_id: fact.correlation_id, causation_id: fact.fact_id, tenant_id: fact.tenant_id, subject: endpoint.id,
    source: WebhookConsumer.source, created_at: new Date().toISOString(),
    payload: {
      delivery_id: id, webhook_config_id: endpoint.id, webhook_config_version: endpoint.version, fact_id: fact.fact_id, fact_type: fact.type,
      fact_stream: fact.stream, event_type: "charge.created", occurred_at: fact.created_at, payload: fact.data
    }
  }
}

/** The floor of a webhook hop at the webhooks queue's settings: POST each body, all at once, ack. No signing, D1 or ledger. */
const hooksBare = async (batch: MessageBatch<{ url: string; id: string; body: string }>) => {
  await Promise.all(batch.messages.map(async (m) => {
    const response = await fetch(m.body.url, { method: "POST", headers: { "webhook-id": m.body.id, "content-type": "application/json" }, body: m.body.body })
    await response.arrayBuffer()
  }))
  batch.ackAll()
}

const hooksBareMessage = (run: string, i: number, url: string) => {
  const call_id = `${run}_c${i}`
  return { url, id: `bare_${call_id}`, body: JSON.stringify({ type: "charge.created", timestamp: new Date().toISOString(), data: { call_id, buyer_id: `${run}_b${i % 50}`, amount_cents: 100 + ((i * 53) % 900), currency: "USD" } }) }
}

// ---- factline's events stage, isolated ----------------------------------------------------------

/** The env the isolated events stage runs with: both relay destinations point at the sink. */
/** Every group's projections and fact-processing binding (`PROJECTIONS_QUEUE`, `PROJECTIONS_QUEUE_1`, …) → the sink. */
const sinkBindings = [RetryPolicy.projections, RetryPolicy.factProcessing].flatMap((policy) =>
  Array.from({ length: QueueGroups.maxGroups }, (_, group) => QueueGroups.bindingName(policy, group)))
const sinkEnvs = new WeakMap<BenchEnv, BenchEnv>()
/** The same object for the same env: the platform keeps one runtime (and its caches) per env object, as a deployed isolate does. */
const sinkEnv = (env: BenchEnv): BenchEnv => {
  let sunk = sinkEnvs.get(env)
  if (!sunk) sinkEnvs.set(env, (sunk = { ...env, ...Object.fromEntries(sinkBindings.map((binding) => [binding, env.BENCH_SINK])) }))
  return sunk
}

/** The batch as the events consumer sees it: from `factline-events`. */
const asEventsBatch = (batch: MessageBatch<unknown>): MessageBatch<unknown> =>
  ({ queue: "factline-events", messages: batch.messages, metadata: (batch as any).metadata, ackAll: () => batch.ackAll(), retryAll: (o?: QueueRetryOptions) => batch.retryAll(o) }) as MessageBatch<unknown>

// ---- drivers ----------------------------------------------------------------------------------

/** An event with the key receipt the HTTP edge stamps on what it accepts (KeyReceipts: its key bound there). */
const receiptsOf = new WeakMap<object, KeyReceipts.Shape>()
const receipted = async <E extends { tenant_id: string; idempotency_key: string; message_type: string; schema_version: number; subject: string; payload: unknown }>(env: BenchEnv, e: E) => {
  let receipts = receiptsOf.get(env)
  if (!receipts) receiptsOf.set(env, (receipts = KeyReceipts.make(env.FACTLINE_SECRETS_KEY)))
  const payload_hash = await AcceptedKeys.payloadHash(e)
  const key_receipt = await receipts.sign({ tenant_id: e.tenant_id, idempotency_key: e.idempotency_key, payload_hash })
  return key_receipt === undefined ? e : { ...e, key_receipt }
}

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

/**
 * The same event with personal data: `call.completed` v3 with the caller's phone (`caller_phone`, personal data of
 * `buyer_id`, apps/example/src/calls/Calls.ts). Its buyer is one of `personalBuyers` shared by every round, as a
 * running platform sees many events per data subject: after the warm-up batch their keys are in the isolate's cache.
 */
const personalBuyers = 20
/** The personal stages' names: the plain stage's name and this (bench/run.mjs pairs them). */
const personalSuffix = ", personal"
/** `call.completed`'s and `outcome`'s declaration (Calls.ts). */
const callerPhone = { subject: "buyer_id", fields: ["caller_phone"] } as const
export const personalCallEvent = (run: string, i: number, buyers: string) => {
  const e = callEvent(run, i)
  return { ...e, schema_version: 3, payload: { ...e.payload, buyer_id: `${buyers}_pb${i % personalBuyers}`, caller_phone: `+1 555 01${String(i % 100).padStart(2, "0")}` } }
}

const benchMessage = (run: string, i: number, isolated = false): BenchMessage => {
  const e = callEvent(run, i)
  return { run, event_id: e.idempotency_key, type: e.message_type, source: e.source, payload: e.payload, ...(isolated ? { isolated } : {}) }
}

const sendAll = async (queue: Queue, bodies: ReadonlyArray<unknown>) => {
  for (let i = 0; i < bodies.length; i += 100) {
    await queue.sendBatch(bodies.slice(i, i + 100).map((body) => ({ body, contentType: "json" as const })))
  }
}

const json = (value: unknown, status = 200) => new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json" } })

/** A MessageBatch like the runtime's, for driving one consumer call in-process. */
const syntheticBatch = <B>(queue: string, bodies: ReadonlyArray<B>) => {
  const outcome = { acked: 0, retried: 0 }
  const messages = bodies.map((body, i) => ({
    id: `synthetic-${i}`, timestamp: new Date(), attempts: 1, body,
    ack: () => void outcome.acked++, retry: () => void outcome.retried++
  }))
  return { batch: { queue, messages, ackAll: () => void (outcome.acked += messages.length), retryAll: () => undefined, metadata: {} } as unknown as MessageBatch<B>, outcome }
}

/** The facts the pipeline derives for these events, as the ledger would store them (with `sealed`: personal events' outcomes, v2, their phone sealed). */
const factsOf = async (events: ReadonlyArray<ReturnType<typeof callEvent>>, sealed?: (data: ReadonlyArray<Record<string, unknown>>) => Promise<ReadonlyArray<Record<string, unknown>>>) => {
  const make = async (e: ReturnType<typeof callEvent>, sequence: number, type: string, data: Record<string, unknown>, version?: number): Promise<Fact> => ({
    fact_id: await FactId.make({ tenantId: "tenant-a", cause: e.idempotency_key, decidedBy: "bench", position: sequence }),
    tenant_id: "tenant-a", stream: e.subject, sequence, type, data, ...(version === undefined ? {} : { schema_version: version }),
    causation_id: e.idempotency_key, correlation_id: e.correlation_id, caused_by: "bench", created_at: new Date(Date.now() + sequence).toISOString()
  })
  const outcomeData = sealed ? await sealed(events.map((e) => e.payload)) : events.map((e) => e.payload)
  const outcomes = await Promise.all(events.map((e, i) => make(e, 1, "outcome", outcomeData[i]!, sealed ? 2 : undefined)))
  const derived = (await Promise.all(events.map(async (e) => {
    const qualified = e.payload.duration_s >= 60
    return [
      await make(e, 2, "qualification", { call_id: e.payload.call_id, qualified }),
      ...(qualified ? [await make(e, 3, "charge", { call_id: e.payload.call_id, buyer_id: e.payload.buyer_id, amount_cents: e.payload.price_cents, currency: "USD" })] : [])
    ]
  }))).flat()
  return { outcomes, derived }
}

/**
 * Counted costs of one batch per stage, for 100 events: the HTTP edge (one POST of 100 events),
 * the events consumer (100 messages), fact-processing (their 100 outcome facts, as the relay sends
 * them: one message), projections (all their facts, as relayed: two messages), naive and bare.
 */
const roundTrips = async (env: BenchEnv, run: string, endpoint: BenchEndpoint | undefined, only: string | null) => {
  const hooks = endpoint ? await webhookRoundTrips(env, run, endpoint) : []
  if (only === "webhooks") return hooks
  return [...(await pipelineRoundTrips(env, run)), ...hooks]
}

/** A counts object zeroed in place (the counting bindings hold a reference to it). */
const reset = (counts: CountingBindings.Counts) => {
  counts.d1RoundTrips = counts.d1Statements = counts.d1RowsRead = counts.d1RowsWritten = 0
  counts.doRpcs = counts.queueSends = counts.queueMessages = counts.queueUnits = 0
  counts.shards.clear()
}

/**
 * Counted costs of one batch of the webhooks consumer (tenant-b, one endpoint on the bench's receiver;
 * every delivery is POSTed for real): a fact message of 10 charges (fan-out: 10 delivery messages), a
 * delivery batch of 2 and of 10 — in a warm isolate (endpoint configs cached, as a running consumer has
 * them for their TTL) — and a delivery batch of 10 in a cold one (the configs read first). The deliveries
 * are of different charges, so their outcome facts (`webhook_sent`, appended to the charge's stream) go
 * to as many streams' shards (at most the tenant's 16); one more row puts all 10 charges in one stream.
 */
const webhookRoundTrips = async (env: BenchEnv, run: string, endpoint: BenchEndpoint) => {
  const facts = (name: string, n: number) => Promise.all(Array.from({ length: n }, (_, i) => chargeFact(`${run}${name}`, i)))
  const deliveries = async (name: string, n: number) => Promise.all((await facts(name, n)).map((f) => deliveryOf(f, endpoint)))
  const consume = async (e: BenchEnv, bodies: ReadonlyArray<unknown>) => {
    const { batch, outcome } = syntheticBatch("factline-webhooks", bodies)
    await platform.queue(batch, e, undefined as never)
    return outcome
  }
  const row = async (counts: CountingBindings.Counts, e: BenchEnv, name: string, delivered: number, bodies: ReadonlyArray<unknown>) => {
    reset(counts)
    const started = Date.now()
    const outcome = await consume(e, bodies)
    const { shards, ...figures } = counts
    return { stage: name, deliveries: delivered, messages: bodies.length, ...figures, shardsTouched: shards.size, ...outcome, ms: Date.now() - started }
  }
  const counts = CountingBindings.make()
  const warm = CountingBindings.env(env, counts)
  // Warm this runtime's endpoint configs and the tenant's shard map, as a running consumer has them.
  await consume(warm, await deliveries("whwarm", 1))
  const rows = []
  rows.push(await row(counts, warm, "webhooks fan-out", 10, [FactMessage.make(await facts("whfan", 10))]))
  rows.push(await row(counts, warm, "webhooks delivery", 2, await deliveries("whd2x", 2)))
  rows.push(await row(counts, warm, "webhooks delivery", 10, await deliveries("whd10x", 10)))
  // The same batch with every triggering fact in one stream (as the tests measure it): one shard, one RPC.
  const oneStream = (await facts("whone", 10)).map((f) => ({ ...f, stream: `${run}whone_c0` }))
  rows.push(await row(counts, warm, "webhooks delivery, one stream", 10, await Promise.all(oneStream.map((f) => deliveryOf(f, endpoint)))))
  const coldCounts = CountingBindings.make()
  rows.push(await row(coldCounts, CountingBindings.env(env, coldCounts), "webhooks delivery, cold isolate", 10, await deliveries("whcold", 10)))
  return rows
}

const pipelineRoundTrips = async (env: BenchEnv, run: string) => {
  // One counting env for every stage: one runtime, as one running isolate consumes every queue — its shard map
  // and placements cached, its metrics tally written by the warm-up batch below (a clean batch within
  // FACTLINE_METRICS_FLUSH_SECONDS of that write waits in the tally: the steady state, no rollup round trip).
  const counts = CountingBindings.make()
  const counting = CountingBindings.env(env, counts)
  /** `batches`: the consumer batches the row covers (the projections row: two, as production's two relays send them). */
  const stage = async (name: string, messages: number, call: (env: BenchEnv) => Promise<{ acked: number; retried: number }>, batches = 1) => {
    reset(counts)
    const started = Date.now()
    const { value: outcome, lines: logLines } = await countingLogLines(() => call(counting))
    const { shards, ...figures } = counts
    return { stage: name, events: 100, messages, batches, ...figures, shardsTouched: shards.size, logLines, ...outcome, ms: Date.now() - started }
  }
  const viaConsumer = (queue: string, bodies: ReadonlyArray<unknown>, consume: (b: MessageBatch<unknown>, e: BenchEnv) => Promise<void>) =>
    async (e: BenchEnv) => {
      const { batch, outcome } = syntheticBatch(queue, bodies)
      await consume(batch, e)
      return outcome
    }
  const size = 100
  // Warm the tenant's shard map and the metrics tally in this runtime, as a running consumer has them.
  await platform.queue(syntheticBatch("factline-events", [callEvent(`${run}warm`, 0)]).batch, counting, undefined as never)
  // The events stage consumes the very messages the HTTP edge queued, as in production: the edge binds their
  // keys (rows written there) and stamps each with its key receipt, so the events consumer makes no claim.
  const events = Array.from({ length: size }, (_, i) => callEvent(`${run}rt`, i))
  const { outcomes, derived } = await factsOf(events)
  const httpEvents = events.map(({ tenant_id: _t, message_id: _m, created_at: _c, ...e }) => e)
  const rows = []
  // What the edge queues (each envelope with its key receipt), recorded on its way: the events stage's input.
  const edgeSent: Array<unknown> = []
  const recording = (e: BenchEnv) => ({
    ...e,
    ...Object.fromEntries(Array.from({ length: QueueGroups.maxGroups }, (_, group) => QueueGroups.bindingName(RetryPolicy.events, group))
      .filter((name) => (e as unknown as Record<string, unknown>)[name] !== undefined)
      .map((name) => {
        const queue = (e as unknown as Record<string, Queue>)[name]!
        return [name, {
          send: (body: unknown, options?: QueueSendOptions) => (edgeSent.push(body), queue.send(body, options)),
          sendBatch: (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
            const list = [...messages]
            edgeSent.push(...list.map((m) => m.body))
            return queue.sendBatch(list, options)
          }
        }]
      }))
  }) as BenchEnv
  rows.push(await stage("http edge", 1, async (e) => {
    const response = await platform.fetch(new Request("http://bench/v1/events", {
      method: "POST", body: JSON.stringify({ events: httpEvents }),
      headers: { authorization: "Bearer dev-token-tenant-a", "content-type": "application/json" }
    }), recording(e), { waitUntil: () => undefined, passThroughOnException: () => undefined } as unknown as ExecutionContext)
    return { acked: response.status === 202 ? size : 0, retried: response.status === 202 ? 0 : size }
  }))
  if (edgeSent.length !== size) throw new Error(`the edge queued ${edgeSent.length} of ${size} events`)
  rows.push(await stage("events", size, viaConsumer("factline-events", edgeSent, (b, e) => platform.queue(b, e, undefined as never))))
  rows.push(await stage("fact-processing", 1, viaConsumer("factline-fact-processing", [FactMessage.make(outcomes)], (b, e) => platform.queue(b, e, undefined as never))))
  // Two batches, as in production: the events stage's relay sends the outcomes, fact-processing's the derived facts a
  // batch later, so a read model's row that both touch (the example's `calls`) is written twice. (Until stop 40 both
  // messages came in one batch, one write: 1 D1 row a event fewer than production.)
  rows.push(await stage("projections", 2, async (e) => {
    const first = await viaConsumer("factline-projections", [FactMessage.make(outcomes)], (b, e) => platform.queue(b, e, undefined as never))(e)
    const second = await viaConsumer("factline-projections", [FactMessage.make(derived)], (b, e) => platform.queue(b, e, undefined as never))(e)
    return { acked: first.acked + second.acked, retried: first.retried + second.retried }
  }, 2))
  rows.push(await stage("naive (seed 003)", size, viaConsumer("bench-naive", Array.from({ length: size }, (_, i) => benchMessage(`${run}rt`, i)), (b, e) => naive(b as MessageBatch<BenchMessage>, e))))
  rows.push(await stage("bare", size, viaConsumer("bench-bare", Array.from({ length: size }, (_, i) => benchMessage(`${run}rt`, i)), (b, e) => bare(b as MessageBatch<BenchMessage>, e))))
  return rows
}

/**
 * Console lines written while `f` runs: each is one log event of Workers Logs in production (billed past an allowance;
 * scripts/capacity.mjs's Workers Logs line). The stages run one at a time, so nothing else writes meanwhile.
 */
const countingLogLines = async <A>(f: () => Promise<A>): Promise<{ readonly value: A; readonly lines: number }> => {
  const methods = ["log", "info", "warn", "error", "debug"] as const
  const saved = methods.map((m) => console[m])
  let lines = 0
  methods.forEach((m, i) => {
    console[m] = (...args: Array<unknown>) => {
      lines++
      saved[i]!.apply(console, args)
    }
  })
  try {
    const value = await f()
    return { value, lines }
  } finally {
    methods.forEach((m, i) => (console[m] = saved[i]!))
  }
}

/**
 * Every platform queue producer (each purpose's group bindings, `*_DLQ` left alone) → the sink: the CPU runs
 * time one stage alone, its sends reaching no consumer that would share the thread meanwhile.
 */
const cpuEnvs = new WeakMap<BenchEnv, BenchEnv>()
const allToSink = (env: BenchEnv): BenchEnv => {
  let sunk = cpuEnvs.get(env)
  if (!sunk) {
    const bindings = RetryPolicy.all.flatMap((policy) => Array.from({ length: QueueGroups.maxGroups }, (_, group) => QueueGroups.bindingName(policy, group)))
    cpuEnvs.set(env, (sunk = { ...env, ...Object.fromEntries(bindings.map((binding) => [binding, env.BENCH_SINK])) }))
  }
  return sunk
}

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted.length === 0 ? 0 : sorted[Math.floor(sorted.length / 2)]!
}

/** BENCH_SLOW=<stage>:<factor>, e.g. `events:1.3` (bench/run.mjs checks its shape): one stage made slower on purpose. */
const slowOf = (value: string | undefined) => {
  if (value === undefined || value === "") return undefined
  const at = value.lastIndexOf(":")
  const factor = Number(value.slice(at + 1))
  if (at <= 0 || !(factor >= 1)) throw new Error(`BENCH_SLOW must be <stage>:<factor ≥ 1>, not ${JSON.stringify(value)}`)
  return { stage: value.slice(0, at), factor }
}

/**
 * The per-stage budget: `batches` synthetic batches of 100 events per stage, one at a time, on the real
 * bindings without latency (every stage's sends go to the sink), after one warm-up batch per stage. Per stage:
 * the mean of the faster half of the rounds and the median batch's milliseconds — wall time inside the one workerd thread, i.e. CPU locally — and where the
 * time went (StageTiming: time inside each kind of binding call, the rest is the worker's own CPU).
 */
const cpuBudget = async (rawEnv: BenchEnv, run: string, batches: number, hooks?: { readonly endpoint: BenchEndpoint; readonly bareUrl: string }, only?: ReadonlyArray<string>) => {
  const slow = slowOf(rawEnv.BENCH_SLOW)
  const base = allToSink(rawEnv)
  const timing = StageTiming.make()
  const timedEnv = StageTiming.env(base, timing)
  const zeroTiming = () => {
    for (const k of Object.keys(timing.ms)) delete timing.ms[k]
    for (const k of Object.keys(timing.calls)) delete timing.calls[k]
    timing.anyMs = 0
  }
  const size = 100
  const ctx = { waitUntil: () => undefined, passThroughOnException: () => undefined } as unknown as ExecutionContext
  const post = (events: ReadonlyArray<ReturnType<typeof callEvent>>, e: BenchEnv) =>
    platform.fetch(new Request("http://bench/v1/events", {
      method: "POST", body: JSON.stringify({ events: events.map(({ tenant_id: _t, message_id: _m, created_at: _c, ...ev }) => ev) }),
      headers: { authorization: "Bearer dev-token-tenant-a", "content-type": "application/json" }
    }), e, ctx).then(async (r) => {
      if (r.status !== 202) throw new Error(`POST /v1/events → ${r.status} ${await r.text()}`)
    })
  const consume = (queue: string, bodies: ReadonlyArray<unknown>, e: BenchEnv, consumer?: (b: MessageBatch<any>, e: BenchEnv) => Promise<void>) => {
    const { batch } = syntheticBatch(queue, bodies)
    return consumer ? consumer(batch, e) : platform.queue(batch, e, undefined as never)
  }
  // The clock advances only at I/O: a timer after the call brings it up to date with the call's trailing
  // synchronous work; the timer's own cost (median of 21) is subtracted.
  const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0))
  const ticks: Array<number> = []
  for (let i = 0; i < 21; i++) {
    const t0 = performance.now()
    await tick()
    ticks.push(performance.now() - t0)
  }
  const tickMs = median(ticks)
  interface Stage<I> {
    readonly name: string
    /** Makes batch i's input (untimed, on the untimed env; -1: the warm-up batch). */
    readonly prepare: (i: number) => Promise<I>
    /** The timed call. */
    readonly call: (input: I, e: BenchEnv) => Promise<void>
    /** What a batch holds: events, or deliveries for the webhooks rows. */
    readonly size: number
  }
  const stageOf = <I>(name: string, prepare: (i: number) => Promise<I>, call: (input: I, e: BenchEnv) => Promise<void>, batchSize = size): Stage<unknown> =>
    ({ name, prepare, call: call as (input: unknown, e: BenchEnv) => Promise<void>, size: batchSize })
  type Sample = { ms: number; kinds: Record<string, number>; calls: Record<string, number>; bindingMs: number; calibrationMs: number }
  const timed = async (stage: Stage<unknown>, i: number): Promise<Sample> => {
    const input = await stage.prepare(i)
    // The calibration timed right before each stage's batch (`calibrationMs`): the stage's batch divided by it is the
    // baseline check's figure, paired so that a spell of other work on the machine lands on both sides of the ratio.
    const calibrationMs = await calibrationSample()
    zeroTiming()
    const started = performance.now()
    await stage.call(input, timedEnv)
    await tick()
    const own = Math.max(0, performance.now() - started - tickMs)
    // BENCH_SLOW=<stage>:<factor> (a self-test of the baseline check, never a measurement): this stage spins
    // (factor − 1) × its own CPU more (the batch less its binding calls' time: what the guard judges), inside the
    // timed window.
    const factor = slow?.stage === stage.name ? slow.factor : 1
    if (factor > 1) await spin(Math.max(0, own - timing.anyMs) * (factor - 1))
    const ms = factor > 1 ? Math.max(0, performance.now() - started - tickMs) : own
    return { ms, kinds: { ...timing.ms }, calls: { ...timing.calls }, bindingMs: timing.anyMs, calibrationMs }
  }
  const summary = (name: string, size: number, samples: ReadonlyArray<Sample>, calibrationFast: number) => {
    const mid = median(samples.map((x) => x.ms))
    // The figure the budget and its baseline check use: the mean of the faster half of the rounds — less moved by
    // other work on a shared machine than the median, and finer than any one round (the clock moves in whole ms).
    const fast = fastHalf(samples.map((x) => x.ms))
    const mean = (f: (x: Sample) => number) => samples.reduce((n, x) => n + f(x), 0) / samples.length
    const kinds = [...new Set(samples.flatMap((x) => Object.keys(x.kinds)))]
    const meanMs = mean((x) => x.ms)
    // The guard's figure (bench/Guard.mjs): the stage's own CPU — its batch less the time a binding call was in
    // flight — the mean of the faster half of the rounds, over the same of every calibration batch of this call (one
    // before each batch of every stage). Own CPU runs on the workerd thread the calibration runs on, so a loaded host
    // stretches both alike; a binding call's local time (SQLite of local D1, a Durable Object, the bench's receiver:
    // other threads and processes, which a loaded host delays unevenly) is not the framework's CPU and is left out
    // (docs/performance.md, "The CPU guard judges itself"). What the bindings are asked to do is counted per event.
    const own = samples.map((x) => Math.max(0, x.ms - x.bindingMs))
    const perCalibration = calibrationFast > 0 ? fastHalf(own) / calibrationFast : 0
    // For reading: the whole batch (own CPU and binding calls) over the same calibration.
    const perCalibrationTotal = calibrationFast > 0 ? fast / calibrationFast : 0
    return {
      stage: name, events: size, batches,
      per_calibration: Math.round(perCalibration * 10000) / 10000,
      per_calibration_total: Math.round(perCalibrationTotal * 10000) / 10000,
      calibration_ms_adjacent: samples.map((x) => Math.round(x.calibrationMs * 10) / 10),
      own_ms_per_batch: own.map((x) => Math.round(x * 10) / 10),
      ms_per_batch_median: Math.round(mid * 10) / 10,
      ms_per_batch_fast_half: Math.round(fast * 100) / 100,
      ms_per_batch: samples.map((x) => Math.round(x.ms * 10) / 10),
      cpu_ms_per_event: Math.round((fast / size) * 1000) / 1000,
      median_cpu_ms_per_event: Math.round((mid / size) * 1000) / 1000,
      // Mean shares of a batch (they add up to the mean batch, not the median).
      where_ms_per_event: {
        ...Object.fromEntries(kinds.map((k) => [k, Math.round((mean((x) => x.kinds[k] ?? 0) / size) * 1000) / 1000])),
        "worker CPU (decode, dispatch, handlers, logging, tracing)": Math.round((mean((x) => Math.max(0, x.ms - x.bindingMs)) / size) * 1000) / 1000
      },
      mean_ms_per_batch: Math.round(meanMs * 10) / 10,
      calls_per_batch: Object.fromEntries(kinds.map((k) => [k, Math.round(mean((x) => x.calls[k] ?? 0) * 10) / 10]))
    }
  }
  const eventsOf = (i: number, tag: string) => Array.from({ length: size }, (_, j) => callEvent(`${run}${tag}${i < 0 ? "w" : i}`, j))
  const personalEventsOf = (i: number, tag: string) => Array.from({ length: size }, (_, j) => personalCallEvent(`${run}${tag}${i < 0 ? "w" : i}`, j, run))
  // Outcomes as the ledger stores them (phone sealed), sealed untimed by a key ring of the bench's own on the same key store.
  const sealer = KeyRing.make({ secretsKey: rawEnv.FACTLINE_SECRETS_KEY }, rawEnv.LEDGER as unknown as KeyStorage.KeyStoreNamespace)
  const sealOutcomes = (data: ReadonlyArray<Record<string, unknown>>) =>
    Effect.runPromise(sealer.seal("tenant-a", data.map((value) => ({ declaration: callerPhone, value }))))
  // An env whose events queues keep what the edge sends them (for the personal events stage's input).
  const caught: Array<unknown> = []
  const catcher = {
    send: async (body: unknown) => void caught.push(body),
    sendBatch: async (messages: Iterable<MessageSendRequest>) => void caught.push(...[...messages].map((m) => m.body))
  }
  const catching = { ...base, ...Object.fromEntries(Array.from({ length: QueueGroups.maxGroups }, (_, group) => [QueueGroups.bindingName(RetryPolicy.events, group), catcher])) } as BenchEnv
  // The cold key cache: its own env object, hence its own runtime (warmed like the others by the warm-up batch), keeping no key.
  const coldBase = { ...base, FACTLINE_KEY_CACHE_SECONDS: "0" } as BenchEnv
  const coldEnv = { untimed: coldBase, timed: StageTiming.env(coldBase, timing) }
  // The projections stage's two messages as two batches, as in production (the outcomes from the events stage's relay,
  // the derived facts from fact-processing's, a batch later).
  const projectionsInTwoBatches = async ([outcomes, derived]: ReadonlyArray<unknown>, e: BenchEnv) => {
    await consume("factline-projections", [outcomes], e)
    await consume("factline-projections", [derived], e)
  }
  const personalStages = (suffix: string, envs?: { readonly untimed: BenchEnv; readonly timed: BenchEnv }): ReadonlyArray<Stage<unknown>> => {
    const on = (e: BenchEnv) => envs === undefined ? e : envs.timed
    const tag = suffix === "" ? "" : "c"
    return [
      stageOf(`http edge${personalSuffix}${suffix}`, async (i) => personalEventsOf(i, `${tag}ph`), (events, e) => post(events, on(e))),
      // The events stage consumes the messages the edge queued (their phone sealed, their keys bound to the sealed
      // payload's hash), caught on their way to the events queue.
      stageOf(`events${personalSuffix}${suffix}`, async (i) => {
        caught.length = 0
        await post(personalEventsOf(i, `${tag}pe`), catching)
        if (caught.length !== size) throw new Error(`the edge queued ${caught.length} of ${size} events`)
        return [...caught]
      }, (messages, e) => consume("factline-events", messages, on(e))),
      stageOf(`fact-processing${personalSuffix}${suffix}`, async (i) => (await factsOf(personalEventsOf(i, `${tag}pf`), sealOutcomes)).outcomes,
        (outcomes, e) => consume("factline-fact-processing", [FactMessage.make(outcomes)], on(e))),
      stageOf(`projections${personalSuffix}${suffix}`, async (i) => {
        const { outcomes, derived } = await factsOf(personalEventsOf(i, `${tag}pp`), sealOutcomes)
        return [FactMessage.make(outcomes), FactMessage.make(derived)]
      }, (messages, e) => projectionsInTwoBatches(messages, on(e)))
    ]
  }
  // The calibration: fixed work of plain JavaScript and one digest (no binding), as large as a small stage's batch.
  // Timed in every round beside the stages, it tells how fast this machine ran meanwhile: the baseline check
  // compares each stage's CPU relative to it, so a slower or busier host moves both and a costlier stage only its own.
  const calibrationInput = JSON.stringify(eventsOf(0, "cal"))
  const calibrate = async () => {
    let n = 0
    for (let k = 0; k < 100; k++) n += (JSON.parse(calibrationInput) as Array<unknown>).length + JSON.stringify(JSON.parse(calibrationInput)).length
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(calibrationInput))
    if (n === 0) throw new Error("calibration did no work")
  }
  const calibrationSample = async () => {
    await tick()
    const t0 = performance.now()
    await calibrate()
    await tick()
    return Math.max(0, performance.now() - t0 - tickMs)
  }
  // The self-test's spin: small slices of plain work, the clock read across a timer between them (it moves only at I/O).
  const spin = async (ms: number) => {
    const t0 = performance.now()
    let n = 0
    while (performance.now() - t0 < ms) {
      for (let k = 0; k < 5; k++) n += JSON.stringify(JSON.parse(calibrationInput)).length
      await tick()
    }
    if (n < 0) throw new Error("unreachable")
  }
  const allStages: ReadonlyArray<Stage<unknown>> = [
    stageOf("http edge", async (i) => eventsOf(i, "h"), (events, e) => post(events, e)),
    // The events stage consumes the messages the edge queued (their keys bound there, each with its key receipt),
    // caught on their way to the events queue, as in production.
    stageOf("events", async (i) => {
      caught.length = 0
      await post(eventsOf(i, "e"), catching)
      if (caught.length !== size) throw new Error(`the edge queued ${caught.length} of ${size} events`)
      return [...caught]
    }, (messages, e) => consume("factline-events", messages, e)),
    stageOf("fact-processing", async (i) => (await factsOf(eventsOf(i, "f"))).outcomes, (outcomes, e) => consume("factline-fact-processing", [FactMessage.make(outcomes)], e)),
    stageOf("projections", async (i) => {
      const { outcomes, derived } = await factsOf(eventsOf(i, "p"))
      return [FactMessage.make(outcomes), FactMessage.make(derived)]
    }, projectionsInTwoBatches),
    stageOf("hand-written events stage", async (i) => Array.from({ length: size }, (_, j) => benchMessage(`${run}k${i}`, j, true)), (bodies, e) => consume("bench-hand-events", bodies, e, handEvents)),
    stageOf("bare", async (i) => Array.from({ length: size }, (_, j) => benchMessage(`${run}b${i}`, j)), (bodies, e) => consume("bench-bare", bodies, e, bare)),
    // The webhooks consumer: a delivery batch of 10 (the queue's batch size) to the bench receiver, its
    // charges in 10 streams (as distinct charges are) and in one; and the bare POST floor at the same size.
    ...(hooks === undefined ? [] : [
      stageOf("webhooks delivery", async (i) => Promise.all(Array.from({ length: 10 }, async (_, j) => deliveryOf(await chargeFact(`${run}wd${i}`, j), hooks.endpoint))),
        (bodies, e) => consume("factline-webhooks", bodies, e), 10),
      stageOf("webhooks delivery, one stream", async (i) => Promise.all(Array.from({ length: 10 }, async (_, j) => deliveryOf({ ...(await chargeFact(`${run}wo${i}`, j)), stream: `${run}wo${i}_c0` }, hooks.endpoint))),
        (bodies, e) => consume("factline-webhooks", bodies, e), 10),
      stageOf("bare POST", async (i) => Array.from({ length: 10 }, (_, j) => hooksBareMessage(`${run}hb${i}`, j, hooks.bareUrl)),
        (bodies, e) => consume("bench-hooks-bare", bodies, e, (b) => hooksBare(b)), 10)
    ]),
    // The same stages with personal data (the issue's budget: none grows more than 10 %): each event carries the
    // caller's phone, personal data of its buyer, one of 20 buyers shared by every round — the edge validates and
    // seals, the events stage opens the payload and the ledger append seals the outcome, fact-processing and
    // projections open the sealed outcomes. Warm: their keys are in the isolate's cache (after the warm-up batch).
    // Cold: the same on an env whose key cache keeps nothing (FACTLINE_KEY_CACHE_SECONDS=0, its own runtime):
    // every batch asks the tenant's key store for its keys (one RPC per tenant per batch and direction).
    ...personalStages(""), ...personalStages(", cold key cache", coldEnv),
    stageOf("calibration", async () => undefined, () => calibrate())
  ]
  // `only`: these stages (and the calibration) — the baseline check's second look at the stages it found over.
  const stages = only === undefined ? allStages : allStages.filter((s) => s.name === "calibration" || only.includes(s.name))
  for (const stage of stages) await stage.call(await stage.prepare(-1), timedEnv)
  // Rounds, not stages one after another: round i times batch i of every stage, so a spell of other work on
  // the machine lands on every stage alike instead of on whichever stage ran then.
  const samples = new Map<string, Array<Sample>>(stages.map((s) => [s.name, []]))
  for (let i = 0; i < batches; i++) for (const stage of stages) samples.get(stage.name)!.push(await timed(stage, i))
  const calibrationFast = fastHalf([...samples.values()].flatMap((xs) => xs.map((x) => x.calibrationMs)))
  return stages.map((stage) => summary(stage.name, stage.size, samples.get(stage.name)!, calibrationFast))
}

/** The mean of the faster half of some timings: a spell of other work on the machine lengthens the slower half. */
const fastHalf = (ms: ReadonlyArray<number>): number => {
  const faster = [...ms].sort((a, b) => a - b).slice(0, Math.max(1, Math.ceil(ms.length / 2)))
  return faster.reduce((n, x) => n + x, 0) / faster.length
}

const count = async (env: BenchEnv, sql: string, ...params: Array<string>) =>
  ((await env.DB.prepare(sql).bind(...params).first<{ n: number }>())?.n ?? 0)

export default {
  async fetch(request: Request, env: BenchEnv, ctx: ExecutionContext) {
    const url = new URL(request.url)
    // The HTTP edge under the latency profile; the bench's own routes (drivers, progress reads) without it.
    if (!url.pathname.startsWith("/bench/")) return platform.fetch(request, Latency.env(env), ctx)
    const run = url.searchParams.get("run") ?? "r"
    const n = Number(url.searchParams.get("n") ?? "0")
    const from = Number(url.searchParams.get("from") ?? "0")
    switch (url.pathname) {
      case "/bench/setup":
        await env.DB.batch(tables.map((t) => env.DB.prepare(t)))
        return json({ ok: true, shards_per_tenant: env.FACTLINE_LEDGER_SHARDS ?? String(Shards.defaultShardsPerTenant) })
      case "/bench/send": {
        const target = url.searchParams.get("queue")
        const ids = Array.from({ length: n }, (_, i) => from + i)
        const queues: Record<string, [Queue, (i: number) => unknown | Promise<unknown>]> = {
          bare: [env.BENCH_BARE, (i) => benchMessage(run, i)],
          naive: [env.BENCH_NAIVE, (i) => benchMessage(run, i)],
          "naive-seed": [env.BENCH_NAIVE_SEED, (i) => benchMessage(run, i)],
          // Events as the HTTP edge queues them: each with its key receipt (the edge bound the key), so the events
          // consumer makes no claim — the isolated stage measures what production's edge-accepted events cost.
          events: [env.BENCH_EVENTS, (i) => receipted(env, callEvent(run, i))],
          "hand-isolated": [env.BENCH_HAND_EVENTS, (i) => benchMessage(run, i, true)],
          hand: [env.BENCH_HAND_EVENTS, (i) => benchMessage(run, i)],
          "hooks-bare": [env.BENCH_HOOKS_BARE, (i) => hooksBareMessage(run, i, url.searchParams.get("url") ?? "")]
        }
        if (target === "webhooks") {
          // Delivery messages, as the fan-out makes them: one per charge, to the given endpoint.
          const endpoint = { id: url.searchParams.get("endpoint") ?? "", version: Number(url.searchParams.get("version") ?? "1") }
          await sendAll(env.WEBHOOKS_QUEUE, await Promise.all(ids.map(async (i) => deliveryOf(await chargeFact(run, i), endpoint))))
          return json({ sent: n })
        }
        if (target === "webhooks-facts") {
          // Charges as the relay sends them to factline-webhooks: several facts to a message (here 100).
          const facts = await Promise.all(ids.map((i) => chargeFact(run, i)))
          for (let i = 0; i < facts.length; i += 100) await env.WEBHOOKS_QUEUE.send(FactMessage.make(facts.slice(i, i + 100)), { contentType: "json" })
          return json({ sent: n, messages: Math.ceil(n / 100) })
        }
        const entry = target ? queues[target] : undefined
        if (!entry) return json({ error: `queue must be one of ${[...Object.keys(queues), "webhooks", "webhooks-facts"].join(", ")}` }, 400)
        await sendAll(entry[0], await Promise.all(ids.map(entry[1])))
        return json({ sent: n })
      }
      case "/bench/progress": {
        if (url.searchParams.get("only") === "backlog") {
          // Messages waiting in the platform's queues (the local broker's backlog of each): what the local broker can
          // hold is what the end-to-end run throttles on; null when a queue does not say.
          const queues = Object.entries(env).filter(([name]) => /^(EVENTS|FACT_PROCESSING|PROJECTIONS)_QUEUE(_\d+)?$/.test(name)).map(([, q]) => q as Queue)
          const depths = await Promise.all(queues.map(async (q) => (await q.metrics().catch(() => undefined))?.backlogCount))
          return json({ backlog: depths.every((d) => typeof d === "number") ? depths.reduce((n: number, d) => n + d!, 0) : null })
        }
        if (url.searchParams.get("only") === "calls") {
          // `tenant`: the noisy-neighbour run reads tenant-b's row too (default tenant-a, the other runs' tenant).
          const tenant = url.searchParams.get("tenant") ?? "tenant-a"
          return json({ calls: await count(env, "SELECT COUNT(*) AS n FROM calls WHERE tenant_id = ? AND call_id >= ? AND call_id < ?", tenant, `${run}_c`, `${run}_d`) })
        }
        const [bareRows, naiveRows, sunk, budgets, hand, callRows, handOutcomes] = await Promise.all([
          count(env, "SELECT COUNT(*) AS n FROM bench_bare WHERE id LIKE ?", `call.completed:${run}_%`),
          count(env, "SELECT COUNT(*) AS n FROM naive_outcomes WHERE run = ?", run),
          count(env, "SELECT COALESCE(SUM(facts), 0) AS n FROM bench_sink WHERE run = ?", run),
          env.DB.prepare("SELECT COALESCE(SUM(spent_cents), 0) AS spent, COALESCE(SUM(charges), 0) AS charges FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id LIKE ?")
            .bind(`${run}_b%`).first<{ spent: number; charges: number }>(),
          env.DB.prepare("SELECT COALESCE(SUM(spent_cents), 0) AS spent, COALESCE(SUM(charges), 0) AS charges FROM hand_budgets WHERE buyer_id LIKE ?")
            .bind(`${run}_b%`).first<{ spent: number; charges: number }>(),
          count(env, "SELECT COUNT(*) AS n FROM calls WHERE tenant_id = 'tenant-a' AND call_id >= ? AND call_id < ?", `${run}_c`, `${run}_d`),
          count(env, "SELECT COUNT(*) AS n FROM hand_facts WHERE fact_id >= ? AND fact_id < ?", `o:call.completed:${run}_`, `o:call.completed:${run}\``)
        ])
        return json({
          bare: bareRows, naive: naiveRows, sink: sunk, calls: callRows, hand_outcomes: handOutcomes,
          spent_cents: budgets?.spent ?? 0, charges: budgets?.charges ?? 0,
          hand_spent_cents: hand?.spent ?? 0, hand_charges: hand?.charges ?? 0
        })
      }
      case "/bench/cpu":
        {
          const endpoint = url.searchParams.get("webhook_endpoint")
          const hooks = endpoint ? { endpoint: { id: endpoint, version: Number(url.searchParams.get("webhook_version") ?? "1") }, bareUrl: url.searchParams.get("bare_url") ?? "" } : undefined
          const only = url.searchParams.get("stages")
          return json(await Latency.withoutFetchLatency(() => cpuBudget(env, run, Math.max(1, Number(url.searchParams.get("batches") ?? "5")), hooks, only === null ? undefined : only.split(","))))
        }
      case "/bench/storage": {
        // The hot tier's bytes per fact (issue 39): each of the tenant's shards' SQLite size and facts, summed.
        const tenant = url.searchParams.get("tenant") ?? "tenant-a"
        const shards = Number(url.searchParams.get("shards") ?? env.FACTLINE_LEDGER_SHARDS ?? String(Shards.defaultShardsPerTenant))
        const namespace = env.LEDGER as unknown as DurableObjectNamespace<LedgerShard>
        const each = await Promise.all(Array.from({ length: shards }, (_, i) => namespace.get(namespace.idFromName(Shards.shardKey(tenant, i))).benchStorage()))
        const bytes = each.reduce((n, x) => n + x.bytes, 0)
        const facts = each.reduce((n, x) => n + x.facts, 0)
        return json({ tenant, shards, bytes, facts, bytes_per_fact: facts === 0 ? null : Math.round(bytes / facts), per_shard: each })
      }
      case "/bench/fresh": {
        // The freshness groups of a run visible in buyer_budgets from group `from` on: [group, charges]. A freshness
        // run's events all qualify, ten to a buyer `<run>_g<group, 7 digits>` (bench/run.mjs).
        const fromGroup = `${run}_g${String(Number(url.searchParams.get("from") ?? "0")).padStart(7, "0")}`
        // `tenants`: the run's tenants, comma-separated (default tenant-a); every tenant's rows are in DB (bench config).
        const tenants = (url.searchParams.get("tenants") ?? "tenant-a").split(",")
        const rows = await env.DB.prepare("SELECT buyer_id, charges FROM buyer_budgets WHERE tenant_id IN (SELECT value FROM json_each(?)) AND buyer_id >= ? AND buyer_id < ?")
          .bind(JSON.stringify(tenants), fromGroup, `${run}_h`).raw<[string, number]>()
        return json(rows.map(([buyer, charges]) => [Number(buyer.slice(buyer.lastIndexOf("_g") + 2)), charges]))
      }
      case "/bench/workflow": {
        // POST: start `n` bench-steps instances of `steps` no-op steps; GET: their status and measurements.
        if (request.method === "POST") {
          return json(await WorkflowStep.start(env, run, Number(url.searchParams.get("n") ?? "10"), Number(url.searchParams.get("steps") ?? "5")))
        }
        return json(await WorkflowStep.status(env, (url.searchParams.get("ids") ?? "").split(",").filter((id) => id !== "")))
      }
      case "/bench/hop": {
        // POST: send hop message `i` (its send under the profile); GET: the run's hop times (ms).
        if (request.method === "POST") {
          await WorkflowStep.sendHop(Latency.env(env).BENCH_HOP, run, Number(url.searchParams.get("i") ?? "0"))
          return json({ sent: true })
        }
        return json(await WorkflowStep.hops(env.DB, run))
      }
      case "/bench/latency":
        if (request.method === "POST") Latency.resetTally()
        return json({ profile: env.FACTLINE_BENCH_LATENCY ?? "none", shape: env.FACTLINE_BENCH_LATENCY === "production" ? (env.FACTLINE_BENCH_LATENCY_SHAPE ?? "lognormal") : "none", local: env.FACTLINE_BENCH_LATENCY === "production" ? Latency.localOf() : "none", table: Latency.production, tally: Latency.tally })
      case "/bench/roundtrips": {
        const endpoint = url.searchParams.get("webhook_endpoint")
        const version = Number(url.searchParams.get("webhook_version") ?? "1")
        return json(await roundTrips(env, run, endpoint ? { id: endpoint, version } : undefined, url.searchParams.get("only")))
      }
      default:
        return json({ error: "unknown bench route" }, 404)
    }
  },
  async queue(batch: MessageBatch<unknown>, rawEnv: BenchEnv, ctx: ExecutionContext) {
    // Every compared consumer under the latency profile (the env itself without it), their POSTs to the receiver too.
    const env = Latency.env(rawEnv)
    Latency.installFetch(rawEnv)
    switch (batch.queue) {
      case "bench-bare": return bare(batch as MessageBatch<BenchMessage>, env)
      case "bench-naive":
      case "bench-naive-seed": return naive(batch as MessageBatch<BenchMessage>, env)
      case "bench-sink": return sink(batch, rawEnv) // the bench's counter, not a compared pipeline
      case "bench-events": return platform.queue(asEventsBatch(batch), sinkEnv(env), ctx)
      case "bench-hand-events": return handEvents(batch as MessageBatch<BenchMessage>, env)
      case "bench-hand-facts": return handFacts(batch as MessageBatch<any>, env)
      case "bench-hooks-bare": return hooksBare(batch as MessageBatch<any>)
      case "bench-hop": return WorkflowStep.consumeHop(batch as MessageBatch<any>, rawEnv.DB) // the driver's note, not a compared pipeline
      default: return platform.queue(batch, env, ctx)
    }
  },
  scheduled: platform.scheduled
}
