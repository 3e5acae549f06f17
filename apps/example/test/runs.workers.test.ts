/**
 * The runs view (`GET /v1/runs`, `POST /v1/runs/:id/retry`): every attempt of a failing decider shows as it is
 * settled, with its error and next retry; "retry now" re-runs a waiting message through the real queue; a
 * tenant sees only its own runs; what is recorded follows FACTLINE_RUNS.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Runs, Sql } from "@factline/core/runtime"
import type { PlatformEnv } from "@factline/workers"
import { drain } from "./Drain.js"
import { platformDatabase, readStream, request, tokenA, tokenB, tokenPlatform, unique } from "./helpers.js"
import { platform } from "./worker.js"

const testEnv = env as unknown as PlatformEnv
/** The production retry delays (the tests' own scale is 0): a retried message waits 15 s and more. */
const productionDelays = { ...testEnv, FACTLINE_RETRY_DELAY_SCALE: "1" } as PlatformEnv

interface RunRow {
  readonly id: string
  readonly queue: string
  readonly message_id: string
  readonly tenant_id: string | null
  readonly message_type: string | null
  readonly subject: string | null
  readonly idempotency_key: string | null
  readonly trace_id: string | null
  readonly attempt: number
  readonly attempts: number
  readonly outcome: string
  readonly error: string | null
  readonly next_retry_at: string | null
  readonly updated_at: string
  readonly can_retry: boolean
}

/** One batch through the platform's queue handler, as the broker hands it over (`id` and `attempts` make a redelivery). */
const deliver = async (body: unknown, options: { readonly id: string; readonly attempts: number; readonly env?: PlatformEnv }) => {
  const batch = createMessageBatch("factline-events-0", [{ id: options.id, timestamp: new Date(), attempts: options.attempts, body }])
  const ctx = createExecutionContext()
  await platform.queue(batch, options.env ?? testEnv, ctx)
  return getQueueResult(batch, ctx)
}

const envelope = (message_type: string, payload: Record<string, unknown>) => ({
  schema_version: 1,
  message_type,
  message_id: unique("msg"),
  idempotency_key: unique("key"),
  correlation_id: unique("corr"),
  tenant_id: "tenant-a",
  subject: unique("subject"),
  source: "test",
  created_at: new Date().toISOString(),
  traceparent: `00-${crypto.randomUUID().replace(/-/g, "")}-${"ab".repeat(8)}-01`,
  payload
})

const list = async (query: string, token = tokenA) => {
  const response = await request(`/v1/runs${query}`, { token })
  const body = await response.json() as { data: Array<RunRow>; next_cursor: string | null; recording: string; error?: { code: string } }
  return { status: response.status, body }
}
const runOf = async (subject: string, token = tokenA) => (await list(`?subject=${encodeURIComponent(subject)}`, token)).body.data

describe("the runs view", () => {
  it("a failing decider's attempts appear at once with their error and next retry; retry now re-runs it through the queue and it succeeds once the fault is lifted", async () => {
    // test.flaky.happened fails transiently `fail_times` times, then succeeds: the fault "lifts" after two attempts.
    const event = envelope("test.flaky.happened", { fail_times: 2 })
    const queueId = unique("qm")

    const first = await deliver(event, { id: queueId, attempts: 1, env: productionDelays })
    expect(first.retryMessages).toEqual([{ msgId: queueId }])
    const settledAt = Date.now()
    const [afterFirst] = await runOf(event.subject)
    // Visible as soon as the attempt is settled: the consumer wrote it before telling the queue.
    expect(Date.now() - settledAt).toBeLessThan(1_000)
    expect(afterFirst).toMatchObject({
      queue: "factline-events", message_id: event.message_id, tenant_id: "tenant-a", message_type: "test.flaky.happened", subject: event.subject,
      idempotency_key: event.idempotency_key, trace_id: event.traceparent.split("-")[1], attempt: 1, attempts: 1, outcome: "retry",
      error: "TransientError: downstream timeout #1", can_retry: true
    })
    // The policy's first delay (15–30 s), as the queue was told.
    const waitsFor = Date.parse(afterFirst!.next_retry_at!) - Date.parse(afterFirst!.updated_at)
    expect(waitsFor).toBeGreaterThanOrEqual(15_000)
    expect(waitsFor).toBeLessThanOrEqual(30_000)

    await deliver(event, { id: queueId, attempts: 2, env: productionDelays })
    const [afterSecond] = await runOf(event.subject)
    expect(afterSecond).toMatchObject({ id: afterFirst!.id, attempt: 2, attempts: 2, outcome: "retry", error: "TransientError: downstream timeout #2", can_retry: true })
    expect(Date.parse(afterSecond!.next_retry_at!) - Date.parse(afterSecond!.updated_at)).toBeGreaterThanOrEqual(30_000)

    // Retry now: a copy goes to the queue at once instead of in 30–60 s.
    const retried = await request(`/v1/runs/${afterSecond!.id}/retry`, { method: "POST", token: tokenA })
    expect(retried.status).toBe(202)
    expect(await retried.json()).toMatchObject({ id: afterSecond!.id, outcome: "rerun" })
    await drain()
    const [afterRetry] = await runOf(event.subject)
    expect(afterRetry).toMatchObject({ id: afterFirst!.id, attempt: 1, attempts: 3, outcome: "ok", error: null, next_retry_at: null, can_retry: false })
    expect((await readStream("tenant-a", event.subject)).facts.map((f) => [f.type, f.data])).toEqual([["flaky_done", { after_failures: 2 }]])

    // The message's own delayed delivery comes later and changes nothing but the count.
    const late = await deliver(event, { id: queueId, attempts: 3, env: productionDelays })
    expect(late.explicitAcks).toEqual([queueId])
    expect((await runOf(event.subject))[0]).toMatchObject({ attempts: 4, outcome: "ok" })
    expect((await readStream("tenant-a", event.subject)).facts).toHaveLength(1)

    // A settled run is not retried again.
    const again = await request(`/v1/runs/${afterFirst!.id}/retry`, { method: "POST", token: tokenA })
    expect(again.status).toBe(409)
    expect(((await again.json()) as { error: { code: string } }).error.code).toBe("already_succeeded")
  })

  it("through the real queue, every attempt of a message that fails twice is recorded, the last as ok", async () => {
    const event = envelope("test.flaky.happened", { fail_times: 2 })
    await env.EVENTS_QUEUE.send(event)
    await drain()
    expect(await runOf(event.subject)).toMatchObject([{ attempt: 3, attempts: 3, outcome: "ok", error: null }])
  })

  it("a dead run points to its dead letter; a message that succeeds at once is recorded only with FACTLINE_RUNS=all", async () => {
    const dead = envelope("test.refused.happened", {})
    await deliver(dead, { id: unique("qm"), attempts: 1 })
    const [run] = await runOf(dead.subject)
    expect(run).toMatchObject({ outcome: "dead", error: "this can never succeed", can_retry: false, next_retry_at: null })
    const refused = await request(`/v1/runs/${run!.id}/retry`, { method: "POST", token: tokenA })
    expect(refused.status).toBe(409)
    const problem = (await refused.json()) as { error: { code: string; message: string; details: Record<string, unknown> } }
    expect(problem.error.code).toBe("dead_lettered")
    expect(problem.error.details).toMatchObject({ queue: "factline-events", type: "test.refused.happened", idempotency_key: dead.idempotency_key })
    await drain()

    const quiet = envelope("test.flaky.happened", { fail_times: 0 })
    expect((await deliver(quiet, { id: unique("qm"), attempts: 1 })).explicitAcks).toHaveLength(1)
    expect(await runOf(quiet.subject)).toEqual([])
    const { body } = await list(`?subject=${quiet.subject}`)
    expect(body.recording).toBe("failures")

    const everything = envelope("test.flaky.happened", { fail_times: 0 })
    await deliver(everything, { id: unique("qm"), attempts: 1, env: { ...testEnv, FACTLINE_RUNS: "all" } as PlatformEnv })
    expect(await runOf(everything.subject)).toMatchObject([{ attempt: 1, attempts: 1, outcome: "ok" }])
  })

  it("a tenant sees and retries only its own runs; the platform scope sees every tenant's", async () => {
    const event = envelope("test.broken.happened", {})
    await deliver(event, { id: unique("qm"), attempts: 1, env: productionDelays })
    const [run] = await runOf(event.subject)
    expect(run).toMatchObject({ tenant_id: "tenant-a", outcome: "retry", error: "TransientError: dependency is down" })

    expect(await runOf(event.subject, tokenB)).toEqual([])
    expect((await request(`/v1/runs/${run!.id}/retry`, { method: "POST", token: tokenB })).status).toBe(404)
    // A served route's path parameter of any length reaches its handler (a problem, not the router's empty 404).
    const long = await request(`/v1/runs/${"r".repeat(500)}/retry`, { method: "POST", token: tokenA })
    expect(long.status).toBe(404)
    expect(((await long.json()) as { error: { code: string } }).error.code).toBe("not_found")
    expect(await runOf(event.subject, tokenPlatform)).toMatchObject([{ id: run!.id }])
    const { body: all } = await list(`?queue=factline-events&outcome=retry&type=test.broken.happened`, tokenPlatform)
    expect(all.data.map((r) => r.id)).toContain(run!.id)
    expect(all.data.every((r) => r.outcome === "retry" && r.message_type === "test.broken.happened")).toBe(true)
  })

  it("bad filters and cursors are a 400 naming the parameter; no token is a 401", async () => {
    for (const [query, path] of [["?outcome=exploded", "outcome"], ["?queue=factline-nope", "queue"], ["?since=yesterday", "since"], ["?cursor=x", "cursor"], ["?limit=0", "limit"]] as const) {
      const { status, body } = await list(query)
      expect(status, query).toBe(400)
      expect(JSON.stringify(body), query).toContain(path)
    }
    expect((await request("/v1/runs")).status).toBe(401)
    expect((await request("/v1/runs/run_x/retry", { method: "POST", token: tokenA })).status).toBe(404)
  })

  it("pages the most recently updated first, and `since` returns only what changed after it", async () => {
    const subject = unique("subject")
    for (let i = 0; i < 3; i++) await deliver({ ...envelope("test.broken.happened", {}), subject }, { id: unique("qm"), attempts: 1, env: productionDelays })
    const first = await list(`?subject=${subject}&limit=2`)
    expect(first.body.data).toHaveLength(2)
    const second = await list(`?subject=${subject}&limit=2&cursor=${first.body.next_cursor}`)
    expect(second.body.data).toHaveLength(1)
    expect(second.body.next_cursor).toBeNull()
    const all = [...first.body.data, ...second.body.data]
    expect(new Set(all.map((r) => r.id)).size).toBe(3)
    const newest = all[0]!.updated_at
    expect(all.map((r) => r.updated_at)).toEqual([...all.map((r) => r.updated_at)].sort().reverse())
    const since = await list(`?subject=${subject}&since=${encodeURIComponent(new Date(Date.parse(newest) + 1).toISOString())}`)
    expect(since.body.data).toEqual([])
  })

  it("stays bounded: runs not updated for the retention are pruned, and beyond the count the least recently updated", async () => {
    const subject = unique("pruned")
    const insert = (id: string, updatedAt: string) => env.DB.prepare(
      `INSERT INTO runs (id, queue, message_id, tenant_id, subject, attempt, attempts, outcome, first_attempted_at, updated_at)
       VALUES (?, 'factline-events', ?, 'tenant-a', ?, 1, 1, 'ok', ?, ?)`
    ).bind(id, id, subject, updatedAt, updatedAt).run()
    const day = 24 * 3600 * 1000
    await insert(`${subject}_old`, new Date(Date.now() - (Runs.retentionDays + 1) * day).toISOString())
    await insert(`${subject}_kept`, new Date(Date.now() + 60_000).toISOString())
    const prune = (keep: number) => Effect.runPromise(Effect.provideService(Runs.prune(new Date(Date.now() - Runs.retentionDays * day).toISOString(), 100, keep), Sql.PlatformDatabase, platformDatabase()))
    expect(await prune(Runs.maxRuns)).toBeGreaterThanOrEqual(1)
    const left = async () => (await env.DB.prepare("SELECT id FROM runs WHERE subject = ?").bind(subject).all<{ id: string }>()).results.map((r) => r.id)
    expect(await left()).toEqual([`${subject}_kept`])
    // Beyond the count (here: keep 1): the most recently updated run stays, an hour-old one within the retention goes.
    await insert(`${subject}_recent`, new Date(Date.now() - 3_600_000).toISOString())
    await prune(1)
    expect(await left()).toEqual([`${subject}_kept`])
  })
})
