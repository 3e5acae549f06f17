import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import { Queues } from "../platform/Queues.js"
import * as TestPlatform from "../testing/TestPlatform.js"
import * as Metrics from "./Metrics.js"

const minute = "2026-01-01T00:00:00.000Z"
/** One rollup row of `queue` holding these lags and batch durations. */
const row = (queue: string, lagsMs: ReadonlyArray<number>, durationsMs: ReadonlyArray<number>, extra: Partial<Metrics.RollupRow> = {}): Metrics.RollupRow => ({
  queue, minute, batches: durationsMs.length, received: lagsMs.length, acked: lagsMs.length, retried: 0, dead_lettered: 0,
  duration_ms_sum: 0, duration_ms_max: 0, batch_size_max: 0,
  lag_histogram: JSON.stringify(Metrics.histogram(lagsMs, Metrics.lagBoundsMs)),
  duration_histogram: JSON.stringify(Metrics.histogram(durationsMs, Metrics.durationBoundsMs)),
  ...extra
})
/** The backlog a binding reports now: group 0's queue of a grouped purpose (or the queue itself), depth and age. */
const live = (policy: RetryPolicy.RetryPolicy, backlogs: ReadonlyArray<{ group?: number; depth: number | null; ageMs?: number | null }>) =>
  new Map([[policy.queue, backlogs.map((b) => ({
    queue: policy.grouped ? `${policy.queue}-${b.group ?? 0}` : policy.queue, group: policy.grouped ? b.group ?? 0 : undefined, depth: b.depth, ageMs: b.ageMs ?? null
  }))]])
const healthOf = (rows: ReadonlyArray<Metrics.RollupRow>, depth: number | null = 0) =>
  Metrics.health([RetryPolicy.events], rows, new Map(), new Map(), live(RetryPolicy.events, [{ depth }]))[0]!

describe("Metrics: a backlog nearing the queue's retention (seed 002)", () => {
  const aged = (hours: number | null, policy: RetryPolicy.RetryPolicy = RetryPolicy.events) =>
    Metrics.health([policy], [], new Map(), new Map(), live(policy, [{ depth: 5, ageMs: hours === null ? null : hours * 3_600_000 }]))[0]!

  it("the oldest message's age is graded against the queue's configured 4-day retention: over 48 h a warning, over 72 h critical", () => {
    expect(RetryPolicy.events.messageRetentionSeconds).toBe(4 * 86_400)
    expect(aged(null)).toMatchObject({ backlog_age_ms: null, status: "ok", retention_seconds: 4 * 86_400, checks: expect.objectContaining({ backlog_age_ms: "ok" }) })
    expect(aged(47).checks.backlog_age_ms).toBe("ok")
    expect(aged(49)).toMatchObject({ status: "warning", checks: expect.objectContaining({ backlog_age_ms: "warning" }) })
    expect(aged(73)).toMatchObject({ status: "critical", backlog_age_ms: 73 * 3_600_000, checks: expect.objectContaining({ backlog_age_ms: "critical" }) })
  })

  it("the rule reads each queue's own retention, not a fixed 4 days: a queue kept 1 day is critical at 19 h, one kept 14 days only warns at 8 days", () => {
    const oneDay = { ...RetryPolicy.webhooks, messageRetentionSeconds: 86_400 }
    expect(aged(11, oneDay).checks.backlog_age_ms).toBe("ok")
    expect(aged(13, oneDay).checks.backlog_age_ms).toBe("warning")
    expect(aged(19, oneDay)).toMatchObject({ retention_seconds: 86_400, checks: expect.objectContaining({ backlog_age_ms: "critical" }) })
    const twoWeeks = { ...RetryPolicy.webhooks, messageRetentionSeconds: 14 * 86_400 }
    expect(aged(73, twoWeeks).checks.backlog_age_ms).toBe("ok")
    expect(aged(8 * 24, twoWeeks).checks.backlog_age_ms).toBe("warning")
  })

  it("the platform's level is the worst queue's, and a warning while a relay is pending", () => {
    expect(Metrics.overall([{ status: "ok" }, { status: "warning" }], 0)).toBe("warning")
    expect(Metrics.overall([{ status: "critical" }, { status: "warning" }], 3)).toBe("critical")
    expect(Metrics.overall([{ status: "ok" }], 1)).toBe("warning")
    expect(Metrics.overall([{ status: "ok" }], 0)).toBe("ok")
  })
})

describe("Metrics: health is graded from the histograms", () => {
  it("a processing p99 above 60 s is critical (and one between 10 s and 60 s a warning)", () => {
    expect(healthOf([row("factline-events", [50], [90_000])]).checks.processing_p99_ms).toBe("critical")
    expect(healthOf([row("factline-events", [50], [20 * 60_000])]).checks.processing_p99_ms).toBe("critical")
    expect(healthOf([row("factline-events", [50], [30_000])]).checks.processing_p99_ms).toBe("warning")
    expect(healthOf([row("factline-events", [50], [10_000])]).checks.processing_p99_ms).toBe("ok")
  })

  it("every graded threshold is a bucket bound with a finite bound above it, so `> threshold` can be told apart", () => {
    const finite = Metrics.durationBoundsMs.filter(Number.isFinite)
    for (const t of [Metrics.thresholds.processing_p99_ms.warning, Metrics.thresholds.processing_p99_ms.critical]) {
      expect(finite).toContain(t)
      expect(Math.max(...finite)).toBeGreaterThan(t)
    }
  })

  it("lag past 5 min is visible: 20 min, 2 h and 10 h each read as their own bucket, up to 12 h", () => {
    expect(healthOf([row("factline-events", [20 * 60_000], [5])]).lag_p99_ms).toBe(3_600_000)
    expect(healthOf([row("factline-events", [2 * 3_600_000], [5])]).lag_p99_ms).toBe(10_800_000)
    expect(healthOf([row("factline-events", [10 * 3_600_000], [5])]).lag_p99_ms).toBe(43_200_000)
    expect(Metrics.lagBoundsMs.filter(Number.isFinite).at(-1)).toBe(43_200_000)
  })

  it("a row written before the bounds grew keeps its meaning: its open bucket (> 60 s) reads past 60 s", () => {
    const old = row("factline-events", [50], [5], { duration_histogram: JSON.stringify([0, 0, 0, 0, 0, 0, 0, 0, 3]) })
    expect(healthOf([old]).checks.processing_p99_ms).toBe("critical")
  })

  it("dead letters by reason, sends and the recorded depth are summed over the window", () => {
    const rows = [
      row("factline-events", [50], [5], { dead_lettered: 2, dead_lettered_by_reason: JSON.stringify({ permanent_failure: 2 }), sent: 7, depth_max: 12 }),
      row("factline-events", [50], [5], { minute: "2026-01-01T00:01:00.000Z", dead_lettered: 1, dead_lettered_by_reason: JSON.stringify({ permanent_failure: 1, retries_exhausted: 0 }), sent: 3, depth_max: 4 })
    ]
    const health = healthOf(rows, null)
    expect(health.dead_lettered_by_reason).toEqual({ permanent_failure: 3, retries_exhausted: 0 })
    expect(health.sent).toBe(10)
    expect(health.depth).toBe(4)                                  // the binding cannot say: the last one recorded
    expect(health.series.map((s) => [s.sent, s.depth])).toEqual([[7, 12], [3, 4]])
  })

  it("a sample's depth is the backlog the queue delivered the batch with, recorded under its purpose and group", () => {
    const messages = [{ id: "m", timestamp: new Date(0), body: {}, attempts: 1, ack() {}, retry() {} }]
    const metadata = { metrics: { backlogCount: 4_321, backlogBytes: 0 } }
    expect(Metrics.sampleOf({ queue: "factline-events", messages, metadata }, undefined, 1, 10).depth).toBe(4_321)
    expect(Metrics.sampleOf({ queue: "factline-events", messages }, undefined, 1, 10).depth).toBeNull()
    expect(Metrics.sampleOf({ queue: "factline-events-3", messages, metadata }, undefined, 1, 10)).toMatchObject({ queue: "factline-events", group: 3, depth: 4_321 })
    expect(Metrics.sampleOf({ queue: "factline-webhooks", messages, metadata }, undefined, 1, 10).group).toBeUndefined()
  })
})

describe("Metrics: a grouped purpose's backlog is every group queue's (seed gap 1)", () => {
  it("depth is the SUM over the group queues, backlog age the OLDEST, each group listed", () => {
    const health = Metrics.health([RetryPolicy.events], [], new Map(), new Map(), live(RetryPolicy.events, [
      { group: 0, depth: 0 }, { group: 1, depth: 2_000, ageMs: 60_000 }, { group: 2, depth: null }, { group: 3, depth: 9_000, ageMs: 50 * 3_600_000 }
    ]))[0]!
    expect(health).toMatchObject({ depth: 11_000, backlog_age_ms: 50 * 3_600_000, status: "warning", checks: expect.objectContaining({ depth: "warning", backlog_age_ms: "warning" }) })
    expect(health.groups).toEqual([
      { queue: "factline-events-0", group: 0, depth: 0, backlog_age_ms: null },
      { queue: "factline-events-1", group: 1, depth: 2_000, backlog_age_ms: 60_000 },
      { queue: "factline-events-2", group: 2, depth: null, backlog_age_ms: null },
      { queue: "factline-events-3", group: 3, depth: 9_000, backlog_age_ms: 50 * 3_600_000 }
    ])
  })

  it("where the bindings cannot say, each group's last recorded depth is summed (not the deepest group's alone)", () => {
    const rows = [
      row("factline-events", [50], [5], { depth_max: 60_000, depth_by_group: JSON.stringify({ "1": 40_000, "3": 60_000 }) }),
      row("factline-events", [50], [5], { minute: "2026-01-01T00:01:00.000Z", depth_max: 70_000, depth_by_group: JSON.stringify({ "3": 70_000 }) })
    ]
    const health = healthOf(rows, null)
    expect(health.depth).toBe(110_000)                                   // group 1's 40,000 + group 3's latest 70,000
    expect(health.checks.depth).toBe("critical")                         // the deepest group alone (70,000) would only warn
    expect(health.series.map((s) => s.depth)).toEqual([100_000, 70_000])
    // A row written before depths were kept per group: its deepest batch's figure, as before.
    expect(healthOf([row("factline-events", [50], [5], { depth_max: 12 })], null).depth).toBe(12)
  })

  it("readHealth asks every bound group queue (4 groups, a backlog in group 3 only) and sums them", async () => {
    const platform = TestPlatform.make([], { settings: { FACTLINE_QUEUE_GROUPS: "4" } })
    await platform.queues.get("factline-events-3")!.sendBatch(Array.from({ length: 7 }, (_, i) => ({ body: { i } })))
    const { queues } = await platform.run(Metrics.readHealth(new Date(0).toISOString()))
    const events = queues.find((q) => q.queue === "factline-events")!
    expect(events.depth).toBe(7)
    expect(events.groups?.map((g) => [g.queue, g.depth])).toEqual([["factline-events-0", 0], ["factline-events-1", 0], ["factline-events-2", 0], ["factline-events-3", 7]])
  })
})

describe("Metrics: recording", () => {
  const sample = (deadLetteredByReason: Record<string, number>): Metrics.Sample => ({
    queue: "factline-events", received: 3, acked: 1, retried: 0, deadLettered: 2, deadLetteredByReason, durationMs: 5, lagsMs: [10, 20, 30], depth: 8
  })
  const rollup = (platform: TestPlatform.TestPlatform) =>
    platform.db.prepare("SELECT queue, sent, dead_lettered, dead_lettered_by_reason, depth_max FROM queue_metrics ORDER BY queue").all<any>().then((r) => r.results)

  it("dead letters by reason and depth merge into the minute's row", async () => {
    const platform = TestPlatform.make([])
    await platform.run(Metrics.record(sample({ permanent_failure: 2 })))
    await platform.run(Metrics.record({ ...sample({ permanent_failure: 1, retries_exhausted: 1 }), depth: 3 }))
    const [events] = await rollup(platform)
    expect(events).toMatchObject({ queue: "factline-events", dead_lettered: 4, depth_max: 8 })
    expect(JSON.parse(events.dead_lettered_by_reason)).toEqual({ permanent_failure: 3, retries_exhausted: 1 })
  })

  it("messages sent are written with the next batch's rollup, in the same round trip, or by the edge at most every 10 s", async () => {
    const platform = TestPlatform.make([])
    const send = (queue: string, n: number) => platform.run(Effect.flatMap(Effect.service(Queues), (q) => q.send(queue, Array.from({ length: n }, (_, i) => ({ i })))))
    await send("factline-webhooks", 3)
    await send("factline-webhooks-dlq", 1)                                // a consumer dead-lettering: counted under the DLQ's own name
    await platform.run(Metrics.flushPending(Metrics.edgeFlushIntervalMs))  // the edge: first write of this isolate
    await send("factline-webhooks", 2)
    await platform.run(Metrics.flushPending(Metrics.edgeFlushIntervalMs))  // within 10 s: left in the tally
    expect((await rollup(platform)).map((r: any) => [r.queue, r.sent])).toEqual([["factline-webhooks", 3], ["factline-webhooks-dlq", 1]])
    await send("factline-batch", 4)
    await platform.run(Metrics.record(sample({})))                       // a consumer batch carries the rest
    expect((await rollup(platform)).map((r: any) => [r.queue, r.sent])).toEqual([["factline-batch", 4], ["factline-events", 0], ["factline-webhooks", 5], ["factline-webhooks-dlq", 1]])
    expect(platform.dataPoints.map((p) => [p.blobs?.[0], p.doubles?.[7]])).toEqual([["factline-webhooks", 3], ["factline-webhooks-dlq", 1], ["factline-events", 0], ["factline-webhooks", 2], ["factline-batch", 4]])
    // Health shows the DLQ's sends beside its queue.
    const { queues } = await platform.run(Metrics.readHealth(new Date(0).toISOString()))
    expect(queues.find((q) => q.queue === "factline-webhooks")).toMatchObject({ sent: 5, dead_letter_sent: 1 })
  })

  it("queue_batch_size is a distribution: every batch counted by size, merged per minute, p50/p99 and buckets in health", async () => {
    const platform = TestPlatform.make([])
    const batchOf = (n: number): Metrics.Sample => ({ queue: "factline-webhooks", received: n, acked: n, retried: 0, deadLettered: 0, durationMs: 5, lagsMs: Array.from({ length: n }, () => 10) })
    for (const n of [1, 1, 1, 1, 1, 1, 1, 1, 3, 10]) await platform.run(Metrics.record(batchOf(n)))
    const [stored] = (await platform.db.prepare("SELECT batch_size_max, batch_size_histogram FROM queue_metrics WHERE queue = 'factline-webhooks'").all<any>()).results
    expect(stored.batch_size_max).toBe(10)
    expect(JSON.parse(stored.batch_size_histogram)).toEqual(Metrics.histogram([1, 1, 1, 1, 1, 1, 1, 1, 3, 10], Metrics.batchSizeBounds))
    const { queues } = await platform.run(Metrics.readHealth(new Date(0).toISOString()))
    expect(queues.find((q) => q.queue === "factline-webhooks")).toMatchObject({
      batches: 10, batch_size_max: 10, batch_size_p50: 1, batch_size_p99: 10,
      batch_size_buckets: { "1": 8, "2": 0, "5": 1, "10": 1, "20": 0, "50": 0, "100": 0, "+Inf": 0 }
    })
  })

  it("each group queue's depth is kept apart in the minute's row (the deepest per group), so health can add the groups up", async () => {
    const platform = TestPlatform.make([])
    const groupBatch = (group: number, depth: number): Metrics.Sample => ({ queue: "factline-events", group, received: 1, acked: 1, retried: 0, deadLettered: 0, durationMs: 5, lagsMs: [10], depth })
    await platform.run(Metrics.record(groupBatch(1, 300)))
    await platform.run(Metrics.record(groupBatch(3, 20_000)))
    await platform.run(Metrics.record(groupBatch(3, 15_000)))
    const [stored] = (await platform.db.prepare("SELECT depth_max, depth_by_group FROM queue_metrics WHERE queue = 'factline-events'").all<any>()).results
    expect(stored.depth_max).toBe(20_000)
    expect(JSON.parse(stored.depth_by_group)).toEqual({ "1": 300, "3": 20_000 })
    const rows = (await platform.db.prepare("SELECT * FROM queue_metrics").all<any>()).results
    expect(Metrics.health([RetryPolicy.events], rows, new Map(), new Map())[0]!.depth).toBe(20_300)
  })

  it("with an interval, a clean batch waits in the isolate's tally; a retry or dead letter writes every waiting batch at once, merged per minute", async () => {
    const platform = TestPlatform.make([])
    const clean: Metrics.Sample = { queue: "factline-projections", received: 2, acked: 2, retried: 0, deadLettered: 0, durationMs: 5, lagsMs: [10, 2_000], depth: 1 }
    const rows = () => platform.db.prepare("SELECT batches, received, acked, retried, depth_max, lag_histogram, duration_histogram FROM queue_metrics WHERE queue = 'factline-projections'").all<any>().then((r) => r.results)
    await platform.run(Metrics.record(clean, 60_000))                    // the isolate's first batch: written
    await platform.run(Metrics.record({ ...clean, depth: 7 }, 60_000))   // within the interval: waits
    await platform.run(Metrics.record({ ...clean, durationMs: 700 }, 60_000))
    expect((await rows()).map((r: any) => [r.batches, r.received, r.depth_max])).toEqual([[1, 2, 1]])
    await platform.run(Metrics.flushPending(60_000))                     // the edge within the interval: nothing
    expect((await rows()).map((r: any) => r.batches)).toEqual([1])
    await platform.run(Metrics.record({ ...clean, acked: 1, retried: 1 }, 60_000))   // a retry: the two waiting go with it
    const [row] = await rows()
    expect(row).toMatchObject({ batches: 4, received: 8, acked: 7, retried: 1, depth_max: 7 })
    expect(JSON.parse(row.lag_histogram)).toEqual(Metrics.histogram([10, 10, 10, 10, 2_000, 2_000, 2_000, 2_000], Metrics.lagBoundsMs))
    expect(JSON.parse(row.duration_histogram)).toEqual(Metrics.histogram([5, 5, 700, 5], Metrics.durationBoundsMs))
    expect(platform.dataPoints.filter((p) => p.blobs?.[0] === "factline-projections")).toHaveLength(4)   // Analytics Engine: every batch at once
  })

  it("an isolate's waiting batches are written by the next call past the interval, and go back to the tally when the write fails", async () => {
    const platform = TestPlatform.make([])
    const clean: Metrics.Sample = { queue: "factline-events", received: 3, acked: 3, retried: 0, deadLettered: 0, durationMs: 5, lagsMs: [10, 10, 10], depth: null }
    const batches = () => platform.db.prepare("SELECT COALESCE(SUM(batches), 0) AS n FROM queue_metrics WHERE queue = 'factline-events'").first<{ n: number }>().then((r) => r!.n)
    await platform.run(Metrics.record(clean, 60_000))
    await platform.run(Metrics.record(clean, 60_000))
    expect(await batches()).toBe(1)
    await platform.db.exec("ALTER TABLE queue_metrics RENAME TO queue_metrics_away")
    await platform.run(Metrics.flushPending(0))                          // the write fails: logged, counts kept
    await platform.db.exec("ALTER TABLE queue_metrics_away RENAME TO queue_metrics")
    expect(await batches()).toBe(1)
    await platform.run(Metrics.flushPending(0))                          // past the interval (0): written
    expect(await batches()).toBe(2)
    await platform.run(Metrics.flushPending(0))                          // nothing waits: nothing written twice
    expect(await batches()).toBe(2)
  })
})
