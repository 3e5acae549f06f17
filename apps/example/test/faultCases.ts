/**
 * Fault cases shared by the fast tests (`*.workers.test.ts`, small sizes) and
 * `npm run chaos` (test/chaos, large sizes): each runs against the real local
 * bindings, asserts nothing itself, and returns a scorecard of what it found in
 * stored state — the callers assert `passed`; only the chaos cases print it
 * (the chaos run also runs the fast tests, whose lines would mix in).
 */
import { createExecutionContext, createMessageBatch, createScheduledController, getQueueResult, waitOnExecutionContext } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { Effect } from "effect"
import { DeadLetterSpill, FactMessage, LedgerTopology, Rebuild, RetryPolicy, Shards, Sql } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import type { PlatformEnv } from "@factline/workers"
import * as Faults from "./faults.js"
import { recordingBatch } from "./instrument.js"
import { callCompleted, eventually, postEvents, request, shuffle, storedFact, tokenPlatform, unique } from "./helpers.js"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv

export interface Scorecard {
  readonly case: string
  readonly passed: boolean
  readonly messages_sent: number
  readonly facts_expected: number
  readonly facts_found: number
  readonly duplicates_found: number
  readonly messages_lost: number
  readonly dlq_expected: number
  readonly dlq_found: number
  readonly [extra: string]: unknown
}

export const print = (card: Scorecard) => console.log(`SCORECARD ${JSON.stringify(card)}`)

/**
 * Delivers `bodies` to `queue`'s consumer in batches, as the platform would: a message the consumer
 * retried comes back in a later round with one more attempt, until none is left (the consumer itself
 * dead-letters on the policy's last attempt). `envFor(attempt)` gives the bindings of each round.
 * Returns how many retries there were.
 */
export const pump = async (
  queue: string,
  bodies: ReadonlyArray<unknown>,
  envFor: (attempt: number) => PlatformEnv,
  batchSize: number,
  concurrency = 2
) => {
  let pending = bodies.map((body) => ({ body, attempts: 1 }))
  let retries = 0
  while (pending.length > 0) {
    const batches: Array<typeof pending> = []
    for (let i = 0; i < pending.length; i += batchSize) batches.push(pending.slice(i, i + batchSize))
    const next: typeof pending = []
    for (let i = 0; i < batches.length; i += concurrency) {
      await Promise.all(batches.slice(i, i + concurrency).map(async (chunk) => {
        const batch = createMessageBatch(queue, chunk.map(({ body, attempts }) => ({ id: unique("qm"), timestamp: new Date(), attempts, body })))
        const ctx = createExecutionContext()
        await platform.queue(batch, envFor(chunk[0]!.attempts), ctx)
        const result = await getQueueResult(batch, ctx)
        const retried = new Set(result.retryMessages.map((r) => r.msgId))
        batch.messages.forEach((m, j) => retried.has(m.id) && next.push({ body: chunk[j]!.body, attempts: chunk[j]!.attempts + 1 }))
      }))
    }
    retries += next.length
    pending = next
  }
  return retries
}

/** The `facts` copy of the streams whose names start with `prefix`: how many rows, how many distinct fact ids. */
export const factsCopy = async (prefix: string) =>
  (await env.DB.prepare("SELECT COUNT(*) AS n, COUNT(DISTINCT fact_id) AS distinct_ids FROM facts WHERE tenant_id = 'tenant-a' AND stream >= ? AND stream < ?")
    .bind(prefix, `${prefix}\uffff`).first<{ n: number; distinct_ids: number }>())!

/** Waits until the facts copy of `prefix` holds `expected` rows (or times out), then a moment more for late copies. */
const settledFacts = async (prefix: string, expected: number, timeoutMs: number) => {
  await eventually(async () => ((await factsCopy(prefix)).n >= expected ? true : undefined), timeoutMs, `${expected} facts under ${prefix}`).catch(() => undefined)
  await new Promise((r) => setTimeout(r, 2_000))
  return factsCopy(prefix)
}

export const budgetsOf = async (prefix: string) =>
  (await env.DB.prepare("SELECT buyer_id, spent_cents, charges, refunds FROM buyer_budgets WHERE tenant_id = 'tenant-a' AND buyer_id >= ? AND buyer_id < ? ORDER BY buyer_id")
    .bind(prefix, `${prefix}\uffff`).all<{ buyer_id: string; spent_cents: number; charges: number; refunds: number }>()).results

export const callRowsOf = async (prefix: string) =>
  (await env.DB.prepare(
    "SELECT call_id, buyer_id, duration_s, currency, qualified, charged_cents, refunded_cents FROM calls WHERE tenant_id = 'tenant-a' AND call_id >= ? AND call_id < ? ORDER BY call_id"
  ).bind(prefix, `${prefix}\uffff`).all<Record<string, unknown>>()).results

/** Dead letters stored for anything that mentions `run` (events and facts of the run). */
export const storedDeadLetters = async (run: string) =>
  (await env.DB.prepare("SELECT COUNT(*) AS n FROM dead_messages WHERE instr(original_message, ?) > 0").bind(run).first<{ n: number }>())!.n

interface Call {
  readonly call_id: string
  readonly buyer_id: string
  readonly duration_s: number
  readonly price_cents: number
}

/** What the projections must hold for these calls (each charged if it lasted ≥ 60 s; `refunded` ones refunded once). */
export const model = (calls: ReadonlyArray<Call>, refunded: ReadonlySet<string> = new Set()) => {
  const budgets = new Map<string, { buyer_id: string; spent_cents: number; charges: number; refunds: number }>()
  for (const c of calls) {
    if (c.duration_s < 60) continue
    const b = budgets.get(c.buyer_id) ?? { buyer_id: c.buyer_id, spent_cents: 0, charges: 0, refunds: 0 }
    b.spent_cents += c.price_cents
    b.charges++
    if (refunded.has(c.call_id)) (b.spent_cents -= c.price_cents, b.refunds++)
    budgets.set(c.buyer_id, b)
  }
  return [...budgets.values()].sort((a, b) => (a.buyer_id < b.buyer_id ? -1 : 1))
}

const callsOf = (run: string, n: number, buyers: number): Array<Call> =>
  Array.from({ length: n }, (_, i) => ({ call_id: `${run}_c${String(i).padStart(5, "0")}`, buyer_id: `${run}_b${i % buyers}`, duration_s: (i * 37) % 180, price_cents: 100 + ((i * 53) % 900) }))

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/**
 * The bindings of each delivery round: faulty on `schedule` while the fault lasts — the first
 * `maxRetries − 1` attempts, so it clears before the policy's retry budget runs out (that is what
 * makes it transient) — then healthy. Dead-letter sends are recorded throughout.
 */
const transientFault = (schedule: Faults.Schedule, policy: RetryPolicy.RetryPolicy) => {
  const faulty = Faults.env(testEnv, schedule)
  const healthy = Faults.env(testEnv, {}, faulty.injected)
  const lasts = policy.maxRetries - 1
  return { injected: faulty.injected, lasts, envFor: (attempt: number) => (attempt <= lasts ? faulty.env : healthy.env) }
}

/**
 * The end of a transient-fault stage case: waits until the run's facts settle, then scores them — every
 * expected fact once, budgets equal to the model, nothing dead-lettered, faults injected and retried.
 */
const settleStage = async (
  name: string,
  { run, calls, expected, faulty, retries, sent }: {
    readonly run: string
    readonly calls: ReadonlyArray<Call>
    readonly expected: number
    readonly faulty: ReturnType<typeof transientFault>
    readonly retries: number
    readonly sent: number
  }
) => {
  const found = await settledFacts(`${run}_c`, expected, 120_000)
  const budgets = await budgetsOf(`${run}_b`)
  const dead = await storedDeadLetters(run)
  const injected = Faults.totalInjected(faulty.injected)
  const passed = found.n === expected && found.distinct_ids === expected && same(budgets, model(calls)) &&
    faulty.injected.deadLettered.length === 0 && dead === 0 && injected > 0 && retries > 0
  return {
    card: {
      case: name, passed, messages_sent: sent, facts_expected: expected, facts_found: found.n,
      duplicates_found: found.n - found.distinct_ids, messages_lost: Math.max(0, expected - found.distinct_ids), dlq_expected: 0,
      dlq_found: faulty.injected.deadLettered.length + dead, faults_injected: injected, faulty_attempts: faulty.lasts, retries, budgets_exact: same(budgets, model(calls))
    } satisfies Scorecard,
    injected: faulty.injected
  }
}

/**
 * Transient infrastructure faults in the events stage: the events consumer runs with D1, LedgerShard and
 * queue bindings that fail on a schedule (refused or reply lost), each event delivered once or twice;
 * downstream stages run on the real queues. Stored state must be exact: every fact once, budgets to the cent.
 */
export const transientEventsStage = async (options: { readonly events: number; readonly schedule: Faults.Schedule; readonly batchSize: number }) => {
  const run = unique("tfe")
  const calls = callsOf(run, options.events, 7)
  const events = calls.map((c) => callCompleted({}, { ...c, currency: "USD" }))
  const deliveries = shuffle(events.flatMap((e, i) => (i % 4 === 0 ? [e, { ...e, message_id: unique("msg") }] : [e])))
  const faulty = transientFault(options.schedule, RetryPolicy.events)
  const retries = await pump("factline-events", deliveries, faulty.envFor, options.batchSize)
  const qualifying = calls.filter((c) => c.duration_s >= 60).length
  const expected = calls.length * 2 + qualifying
  return settleStage("transient faults: events stage", { run, calls, expected, faulty, retries, sent: deliveries.length })
}

/**
 * Transient faults in the fact-processing stage: outcome facts (never in the ledger, so nothing else derives
 * from them) are processed with failing LedgerShard and queue bindings; their derived facts must be
 * appended once each and reach the projections exactly.
 */
export const transientProcessingStage = async (options: { readonly outcomes: number; readonly schedule: Faults.Schedule; readonly batchSize: number }) => {
  const run = unique("tfp")
  const calls = callsOf(run, options.outcomes, 5)
  const outcomes = await Promise.all(calls.map((c) => storedFact(c.call_id, 1, "outcome", { ...c, currency: "USD" })))
  const messages: Array<unknown> = []
  for (let i = 0; i < outcomes.length; i += 5) messages.push(FactMessage.make(outcomes.slice(i, i + 5)))
  const faulty = transientFault(options.schedule, RetryPolicy.factProcessing)
  const retries = await pump("factline-fact-processing", shuffle([...messages, ...messages.slice(0, Math.ceil(messages.length / 4))]), faulty.envFor, options.batchSize)
  const qualifying = calls.filter((c) => c.duration_s >= 60).length
  const expected = calls.length + qualifying // a qualification each, a charge each qualifying call
  return settleStage("transient faults: fact-processing stage", { run, calls, expected, faulty, retries, sent: messages.length })
}

/**
 * Transient faults in the projections stage: whole call lives (outcome, qualification, charge, and a refund
 * for every third qualifying call) applied with a D1 that fails on a schedule — refused, or committed with
 * the reply lost. The facts copy, `calls` and `buyer_budgets` must come out exact.
 */
export const transientProjectionsStage = async (options: { readonly calls: number; readonly schedule: Faults.Schedule; readonly batchSize: number }) => {
  const run = unique("tfq")
  const calls = callsOf(run, options.calls, 5)
  const refunded = new Set(calls.filter((c) => c.duration_s >= 60).filter((_, i) => i % 3 === 0).map((c) => c.call_id))
  const lives: Array<Array<Fact>> = await Promise.all(calls.map(async (c) => {
    const qualified = c.duration_s >= 60
    const money = { call_id: c.call_id, buyer_id: c.buyer_id, amount_cents: c.price_cents, currency: "USD" }
    return [
      await storedFact(c.call_id, 1, "outcome", { ...c, currency: "USD" }),
      await storedFact(c.call_id, 2, "qualification", { call_id: c.call_id, qualified }),
      ...(qualified ? [await storedFact(c.call_id, 3, "charge", money)] : []),
      ...(refunded.has(c.call_id) ? [await storedFact(c.call_id, 4, "refund", money)] : [])
    ]
  }))
  // Each life split over two messages, all shuffled: facts of one call arrive in any order.
  const messages = shuffle(lives.flatMap((life) => [FactMessage.make(life.slice(0, 2)), ...(life.length > 2 ? [FactMessage.make(life.slice(2))] : [])]))
  const faulty = transientFault(options.schedule, RetryPolicy.projections)
  const retries = await pump("factline-projections", messages, faulty.envFor, options.batchSize)
  const expected = lives.reduce((n, l) => n + l.length, 0)
  const found = await factsCopy(`${run}_c`)
  const budgets = await budgetsOf(`${run}_b`)
  const rows = await callRowsOf(`${run}_c`)
  const expectedRows = calls.map((c) => ({
    call_id: c.call_id, buyer_id: c.buyer_id, duration_s: c.duration_s, currency: "USD", qualified: c.duration_s >= 60 ? 1 : 0,
    charged_cents: c.duration_s >= 60 ? c.price_cents : 0, refunded_cents: refunded.has(c.call_id) ? c.price_cents : 0
  }))
  const dead = await storedDeadLetters(run)
  const injected = Faults.totalInjected(faulty.injected)
  const budgetsExact = same(budgets, model(calls, refunded))
  const passed = found.n === expected && found.distinct_ids === expected && budgetsExact && same(rows, expectedRows) &&
    faulty.injected.deadLettered.length === 0 && dead === 0 && injected > 0 && retries > 0
  return {
    card: {
      case: "transient faults: projections stage", passed, messages_sent: messages.length, facts_expected: expected, facts_found: found.n,
      duplicates_found: found.n - found.distinct_ids, messages_lost: Math.max(0, expected - found.distinct_ids), dlq_expected: 0,
      dlq_found: faulty.injected.deadLettered.length + dead, faults_injected: injected, faulty_attempts: faulty.lasts, retries, budgets_exact: budgetsExact, rows_exact: same(rows, expectedRows)
    } satisfies Scorecard,
    injected: faulty.injected
  }
}

const rebuildStatus = async (batchId: string) => (await (await request(`/v1/batches/${batchId}`, { token: tokenPlatform })).json<any>()).status as string

const startRebuild = async (projection: string) => {
  const started = await request("/v1/batches", { method: "POST", token: tokenPlatform, body: JSON.stringify({ operation: "rebuild", projection }) })
  if (started.status !== 202) throw new Error(`rebuild of ${projection} refused: ${started.status} ${await started.text()}`)
  return (await started.json<any>()).batch_id as string
}

/**
 * A rebuild during live traffic: calls are posted over HTTP, paced, while `buyer_budgets` is rebuilt
 * (a quarter of the first wave posted again as replays), then disputes refund some of the first wave's
 * calls while `calls` is rebuilt (`rebuildCalls`). Other tenants' shards are registered first so that a rebuild replays
 * in several slices: tenant-a's shards come first, and what arrives between their replay and the swap
 * reaches the new table only through the live consumer's writes to the shadow. Once everything settled,
 * both tables must hold exactly the rows live traffic alone gives (the model of the distinct events),
 * and the traffic must have overlapped the rebuilds.
 */
export const rebuildUnderLiveTraffic = async (options: {
  readonly calls: number
  readonly perPost: number
  readonly paceMs: number
  /** Also rebuild `calls` while the disputes arrive (else they arrive with no rebuild running). */
  readonly rebuildCalls: boolean
}) => {
  const run = unique("rbl")
  // Shard keys that sort after tenant-a's: at least two slices of Rebuild.shardsPerSlice.
  const others = Array.from({ length: Math.ceil((2 * Rebuild.shardsPerSlice) / Shards.defaultShardsPerTenant) }, (_, i) => `tenant-zz-${run}-${i}`)
  await Effect.runPromise(LedgerTopology.make(Sql.make("platform", env.DB)).register(others))
  const calls = callsOf(run, options.calls, 6)
  const events = calls.map((c) => callCompleted({}, { ...c, currency: "USD" }))
  const first = events.slice(0, Math.ceil(events.length / 3))
  const rest = events.slice(first.length)
  const posts: Array<ReadonlyArray<unknown>> = []
  for (let i = 0; i < rest.length; i += options.perPost) posts.push(rest.slice(i, i + options.perPost))
  for (let i = 0; i < first.length; i += options.perPost * 4) posts.push(first.slice(i, i + options.perPost)) // replays
  let sent = 0
  let overlapped = 0
  const pace = () => new Promise((r) => setTimeout(r, options.paceMs))
  /** Posts, and counts the post as overlapping when the rebuild was running before and after it. */
  const post = async (body: unknown, count: number, rebuild?: string) => {
    const before = rebuild === undefined ? undefined : await rebuildStatus(rebuild)
    const response = await postEvents(body)
    if (response.status !== 202) throw new Error(`post refused: ${response.status} ${await response.text()}`)
    sent += count
    if (rebuild !== undefined && before === "running" && (await rebuildStatus(rebuild)) === "running") overlapped++
  }

  // Wave 1, fully processed before anything is rebuilt (its calls are disputed later).
  for (let i = 0; i < first.length; i += options.perPost) await post({ events: first.slice(i, i + options.perPost) }, Math.min(options.perPost, first.length - i))
  const firstCharges = first.filter((e) => e.payload.duration_s >= 60)
  await eventually(async () => {
    const budgets = await budgetsOf(`${run}_b`)
    return budgets.reduce((n, b) => n + b.charges, 0) >= firstCharges.length ? true : undefined
  }, 120_000, "the first wave's charges")

  // Live traffic, paced, while buyer_budgets is rebuilt.
  const budgetsRebuild = await startRebuild("buyer_budgets")
  for (const list of shuffle(posts)) {
    await post({ events: list }, list.length, budgetsRebuild)
    await pace()
  }
  await eventually(async () => ((await rebuildStatus(budgetsRebuild)) === "completed" ? true : undefined), 240_000, "the buyer_budgets rebuild")

  // Disputes (refunds of every third charged call of wave 1), paced, while calls is rebuilt.
  const refunded = new Set(firstCharges.filter((_, i) => i % 3 === 0).map((e) => e.subject))
  const callsRebuild = options.rebuildCalls ? await startRebuild("calls") : undefined
  for (const call_id of refunded) {
    await post({ schema_version: 1, message_type: "call.dispute", idempotency_key: `dispute:${call_id}`, subject: call_id, payload: { call_id, reason: "x" } }, 1, callsRebuild)
    if (callsRebuild !== undefined) await pace()
  }
  if (callsRebuild !== undefined) await eventually(async () => ((await rebuildStatus(callsRebuild)) === "completed" ? true : undefined), 240_000, "the calls rebuild")

  const qualifying = calls.filter((c) => c.duration_s >= 60).length
  const expected = calls.length * 2 + qualifying + refunded.size
  const found = await settledFacts(`${run}_c`, expected, 180_000)
  const expectedBudgets = model(calls, refunded)
  const expectedRows = calls.map((c) => ({
    call_id: c.call_id, buyer_id: c.buyer_id, duration_s: c.duration_s, currency: "USD", qualified: c.duration_s >= 60 ? 1 : 0,
    charged_cents: c.duration_s >= 60 ? c.price_cents : 0, refunded_cents: refunded.has(c.call_id) ? c.price_cents : 0
  }))
  // The projections trail the facts copy by a moment: wait for them (or give up), then compare.
  await eventually(async () => (same(await budgetsOf(`${run}_b`), expectedBudgets) && same(await callRowsOf(`${run}_c`), expectedRows) ? true : undefined), 30_000, "the rows")
    .catch(() => undefined)
  const budgets = await budgetsOf(`${run}_b`)
  const rows = await callRowsOf(`${run}_c`)
  const dead = await storedDeadLetters(run)
  const budgetsExact = same(budgets, expectedBudgets)
  const rowsExact = same(rows, expectedRows)
  const passed = found.n === expected && found.distinct_ids === expected && budgetsExact && rowsExact && dead === 0 && overlapped > 0
  return {
    card: {
      case: "rebuild during live traffic", passed, messages_sent: sent, facts_expected: expected, facts_found: found.n,
      duplicates_found: found.n - found.distinct_ids, messages_lost: Math.max(0, expected - found.distinct_ids), dlq_expected: 0, dlq_found: dead,
      posts_during_rebuild: overlapped, budgets_exact: budgetsExact, rows_exact: rowsExact
    } satisfies Scorecard,
    budgets, expectedBudgets, rows, expectedRows
  }
}

/** Every `dead_messages` row, in every database, whose original message mentions `run`. */
export const deadLetterRows = async (run: string) => {
  const rows: Array<Record<string, any>> = []
  for (const db of [env.DB, env.FACTLINE_READ_DB_1]) {
    rows.push(...(await db.prepare("SELECT * FROM dead_messages WHERE instr(original_message, ?) > 0").bind(run).all<Record<string, any>>()).results)
  }
  return rows
}

/** The keys of spilled dead letters (R2) whose message id mentions `run`. */
export const spilledKeys = async (run: string) => {
  const keys: Array<string> = []
  let cursor: string | undefined
  do {
    const page = await env.PAYLOADS.list({ prefix: DeadLetterSpill.prefix, ...(cursor === undefined ? {} : { cursor }) })
    keys.push(...page.objects.map((o) => o.key).filter((k) => k.includes(run)))
    cursor = page.truncated ? page.cursor : undefined
  } while (cursor !== undefined)
  return keys
}

/** One scheduled (cron) run on `runEnv`; a run that fails (D1 is down) is what the cron would see too. */
export const cron = async (runEnv: PlatformEnv) => {
  const ctx = createExecutionContext()
  const failed = await platform.scheduled(createScheduledController({ scheduledTime: new Date(), cron: "*/5 * * * *" }), runEnv, ctx).then(() => false, () => true)
  await waitOnExecutionContext(ctx)
  return { failed }
}

/** The bindings of an outage: every database down, and R2 refusing puts when `r2Down`. */
export const outageEnv = (options: { readonly d1Down: boolean; readonly r2Down: boolean; readonly deletesRefused?: boolean }): PlatformEnv => {
  const e = testEnv as unknown as Record<string, unknown>
  return {
    ...testEnv,
    ...(options.d1Down ? { DB: Faults.down(env.DB), FACTLINE_READ_DB_1: Faults.down(env.FACTLINE_READ_DB_1) } : {}),
    ...(options.r2Down ? { PAYLOADS: Faults.refusingPuts(e.PAYLOADS as R2Bucket, () => true) } : {}),
    ...(options.deletesRefused ? { PAYLOADS: Faults.refusingDeletes(e.PAYLOADS as R2Bucket) } : {})
  } as PlatformEnv
}

/**
 * A long D1 outage under the dead-letter consumers (issue 21, item 11). Dead letters reach the DLQ consumers
 * (three DLQs; some records of tenant-a, every tenth a raw body with no tenant) over the first
 * `arrivalMinutes`, while every database refuses for `outageHours` and R2 refuses puts for the first
 * `r2DownMinutes` too. Time is simulated minute by minute: each message is delivered as the platform would —
 * again after the delay the consumer asked for, at most 11 times (the DLQs have no DLQ: a message retried on its
 * 11th delivery is gone) — and the cron runs every 5 minutes, during the outage too (its recovery must not
 * delete what it could not store); its first run after the outage dies between insert and delete (R2 refuses
 * the delete). At the end every dead letter must be in `dead_messages` once, with its record, and no spilled
 * object left in R2.
 */
export const longD1Outage = async (options: {
  readonly deadLetters: number
  readonly outageHours: number
  readonly r2DownMinutes: number
  readonly arrivalMinutes: number
  readonly batchSize: number
}) => {
  const run = unique("dlo")
  const queues = ["factline-events-dlq", "factline-projections-dlq", "factline-webhooks-dlq"]
  const outageMinutes = options.outageHours * 60
  const at = new Date().toISOString()
  const messages = Array.from({ length: options.deadLetters }, (_, i) => {
    const key = `${run}:k${i}`
    const original = { schema_version: 2, message_type: "call.completed", idempotency_key: key, tenant_id: "tenant-a", subject: `${run}_s${i}`, payload: { run, i } }
    const raw = i % 10 === 9
    const queue = queues[i % queues.length]!
    const body = raw
      ? { run, idempotency_key: key, note: "not a record: its consumer crashed on every attempt" }
      : { original_message: original, failure: { reason: "retries_exhausted", last_error: `attempt ${i} failed`, attempts: 6, first_attempted_at: at, last_attempted_at: at, queue: queue.replace(/-dlq$/, "") } }
    return { id: `${run}_m${i}`, key, queue, raw, body, arrival: Math.floor((i * options.arrivalMinutes) / options.deadLetters) }
  })
  const byId = new Map(messages.map((m) => [m.id, m]))
  const envs = {
    d1AndR2Down: outageEnv({ d1Down: true, r2Down: true }),
    d1Down: outageEnv({ d1Down: true, r2Down: false }),
    r2Down: outageEnv({ d1Down: false, r2Down: true }),
    deletesRefused: outageEnv({ d1Down: false, r2Down: false, deletesRefused: true }),
    healthy: testEnv
  }
  let pending = messages.map((m) => ({ id: m.id, attempts: 1, due: m.arrival }))
  const dropped: Array<string> = []
  let deliveries = 0
  let retries = 0
  let maxAttempts = 0
  let spilledPeak = 0
  let cronRuns = 0
  let cronRunsFailed = 0
  let crashed = false
  let spilledAfterCrash = -1
  let rowsAfterCrash = -1
  const end = Math.max(outageMinutes, options.arrivalMinutes) + 60
  for (let t = 0; t <= end || pending.length > 0; t++) {
    const d1Down = t < outageMinutes
    const r2Down = t < options.r2DownMinutes
    const roundEnv = d1Down ? (r2Down ? envs.d1AndR2Down : envs.d1Down) : r2Down ? envs.r2Down : envs.healthy
    const due = pending.filter((p) => p.due <= t)
    pending = pending.filter((p) => p.due > t)
    for (const queue of queues) {
      const mine = due.filter((p) => byId.get(p.id)!.queue === queue)
      for (let i = 0; i < mine.length; i += options.batchSize) {
        const chunk = mine.slice(i, i + options.batchSize)
        const batch = createMessageBatch(queue, chunk.map((p) => ({ id: p.id, timestamp: new Date(), attempts: p.attempts, body: byId.get(p.id)!.body })))
        const ctx = createExecutionContext()
        const recording = recordingBatch(batch)
        await platform.queue(recording.batch, roundEnv, ctx)
        const result = await getQueueResult(batch, ctx)
        deliveries += chunk.length
        for (const p of chunk) maxAttempts = Math.max(maxAttempts, p.attempts)
        for (const retry of result.retryMessages) {
          const p = chunk.find((c) => c.id === retry.msgId)!
          retries++
          // The DLQ consumers' max_retries: past it the platform drops the message (no DLQ of their own).
          if (p.attempts >= RetryPolicy.deadLetterConsumer.maxRetries + 1) dropped.push(p.id)
          else pending.push({ id: p.id, attempts: p.attempts + 1, due: t + Math.max(1, Math.ceil((recording.retries.get(p.id)?.delaySeconds ?? 0) / 60)) })
        }
      }
    }
    if (t % 5 === 0) {
      const crashRun = !d1Down && !crashed && (await spilledKeys(run)).length > 0
      const { failed } = await cron(d1Down ? roundEnv : crashRun ? envs.deletesRefused : envs.healthy)
      cronRuns++
      if (failed) cronRunsFailed++
      if (crashRun) {
        crashed = true
        spilledAfterCrash = (await spilledKeys(run)).length
        rowsAfterCrash = (await deadLetterRows(run)).length
      }
    }
    if (t === outageMinutes - 1) spilledPeak = (await spilledKeys(run)).length
  }
  const rows = await deadLetterRows(run)
  const distinct = new Set(rows.map((r) => r.idempotency_key ?? JSON.parse(r.original_message).idempotency_key))
  const spilledLeft = (await spilledKeys(run)).length
  const recordsExact = messages.every((m) => {
    const row = rows.find((r) => r.id === m.id)
    if (row === undefined) return false
    const original = m.raw ? m.body : (m.body as { original_message: unknown }).original_message
    return row.status === "open" && row.queue === m.queue.replace(/-dlq$/, "") && row.idempotency_key === m.key &&
      row.tenant_id === (m.raw ? null : "tenant-a") && row.reason === (m.raw ? "platform_retries_exhausted" : "retries_exhausted") &&
      row.original_message === JSON.stringify(original)
  })
  const lost = options.deadLetters - distinct.size
  const passed = lost === 0 && rows.length === options.deadLetters && dropped.length === 0 && spilledLeft === 0 && spilledPeak > 0 && recordsExact &&
    crashed && spilledAfterCrash > 0
  return {
    card: {
      case: `long D1 outage under the DLQ consumers: ${options.outageHours} h`, passed, messages_sent: options.deadLetters, facts_expected: 0, facts_found: 0,
      duplicates_found: rows.length - distinct.size, messages_lost: lost, dlq_expected: options.deadLetters, dlq_found: rows.length,
      deliveries, retries, max_attempts: maxAttempts, dropped_by_platform: dropped.length, spilled_at_outage_end: spilledPeak,
      spilled_left: spilledLeft, spilled_after_crash_run: spilledAfterCrash, rows_after_crash_run: rowsAfterCrash, cron_runs: cronRuns,
      cron_runs_failed: cronRunsFailed, records_exact: recordsExact
    } satisfies Scorecard
  }
}
