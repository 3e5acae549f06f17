import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { TestClock } from "effect/testing"
import { describe, expect, it, vi } from "vitest"
import * as TestPlatform from "../testing/TestPlatform.js"
import * as Consumer from "./Consumer.js"
import * as Deadline from "./Deadline.js"
import * as RetryPolicy from "./RetryPolicy.js"

/** A batch as Queues hands it over, recording how each message was settled. */
const batchOf = (queue: string, bodies: ReadonlyArray<{ readonly id: string; readonly attempts: number; readonly body: unknown; readonly timestamp?: Date }>) => {
  const settled = new Map<string, { readonly ack: true } | { readonly retry: { readonly delaySeconds?: number } }>()
  const messages = bodies.map((b) => ({
    id: b.id,
    attempts: b.attempts,
    body: b.body,
    timestamp: b.timestamp ?? new Date(0),
    ack: () => void settled.set(b.id, { ack: true }),
    retry: (options: { delaySeconds?: number } = {}) => void settled.set(b.id, { retry: options })
  }))
  const batch = { queue, messages, metadata: {}, ackAll: () => {}, retryAll: () => {} } as unknown as MessageBatch<unknown>
  return { batch, settled }
}

/**
 * A consumer whose work is one unit per item, each taking 400 ms of (test) clock and writing its row once more:
 * a row's `n` above 1 is work done twice. It checks the deadline between units, as the batch consumer does.
 */
const slowSpec = (platform: TestPlatform.TestPlatform): Consumer.Spec<string, never, never> => ({
  policy: RetryPolicy.batch,
  delayScale: 0,
  log: "none",
  runs: "none",
  decode: (body) => Effect.succeed([{ key: String(body), value: String(body) }]),
  process: (items) =>
    Effect.gen(function*() {
      const outcomes = new Map<string, Consumer.Outcome>()
      for (const [at, { key }] of items.entries()) {
        if (at > 0 && (yield* Deadline.passed)) {
          outcomes.set(key, Deadline.handedBack)
          continue
        }
        platform.db.sqlite.prepare("INSERT INTO work (key, n) VALUES (?, 1) ON CONFLICT (key) DO UPDATE SET n = n + 1").run(key)
        yield* TestClock.adjust("400 millis")
        outcomes.set(key, Consumer.done)
      }
      return outcomes as ReadonlyMap<string, Consumer.Outcome>
    })
})

const setup = () => {
  const platform = TestPlatform.make([])
  platform.db.sqlite.exec("CREATE TABLE work (key TEXT PRIMARY KEY, n INTEGER NOT NULL)")
  const rows = () => Object.fromEntries((platform.db.sqlite.prepare("SELECT key, n FROM work ORDER BY key").all() as Array<{ key: string; n: number }>).map((r) => [r.key, r.n]))
  /** One invocation on the test clock, with a budget of 1 s. */
  const consume = (batch: MessageBatch<unknown>) =>
    platform.run(Consumer.run(slowSpec(platform), batch).pipe(Effect.provideService(Deadline.Budget, 1_000), Effect.provide(TestClock.layer())))
  return { platform, rows, consume }
}

describe("a consumer invocation's time budget", () => {
  it("a batch that spends its budget part-way acks the work done, retries the rest at once, and the next delivery finishes it: each unit done once", async () => {
    const { rows, consume } = setup()
    const keys = ["a", "b", "c", "d", "e"]
    const first = batchOf("factline-batch", keys.map((key) => ({ id: `m-${key}`, attempts: 1, body: key })))
    const warned = vi.spyOn(console, "warn").mockImplementation(() => {})
    try {
      const counts = await consume(first.batch)
      // Units start at 0, 400 and 800 ms; at 1,200 ms the 1 s budget is spent: d and e are handed back unstarted.
      expect(counts).toMatchObject({ acked: 3, retried: 2, handedBack: 2, deadLettered: 0 })
    } finally {
      warned.mockRestore()
    }
    expect(rows()).toEqual({ a: 1, b: 1, c: 1 })
    expect(Object.fromEntries(first.settled)).toEqual({
      "m-a": { ack: true }, "m-b": { ack: true }, "m-c": { ack: true },
      // At once (no backoff: they did not fail), whatever the queue's policy delay.
      "m-d": { retry: { delaySeconds: 0 } }, "m-e": { retry: { delaySeconds: 0 } }
    })

    const again = batchOf("factline-batch", ["d", "e"].map((key) => ({ id: `m-${key}`, attempts: 2, body: key })))
    await consume(again.batch)
    expect(Object.fromEntries(again.settled)).toEqual({ "m-d": { ack: true }, "m-e": { ack: true } })
    expect(rows()).toEqual({ a: 1, b: 1, c: 1, d: 1, e: 1 })
  })

  it("the first unit always runs, however small the budget: every invocation makes progress", async () => {
    const { platform, rows } = setup()
    const { batch, settled } = batchOf("factline-batch", [{ id: "m-a", attempts: 1, body: "a" }, { id: "m-b", attempts: 1, body: "b" }])
    await platform.run(Consumer.run(slowSpec(platform), batch).pipe(Effect.provideService(Deadline.Budget, 0), Effect.provide(TestClock.layer())))
    expect(rows()).toEqual({ a: 1 })
    expect(Object.fromEntries(settled)).toEqual({ "m-a": { ack: true }, "m-b": { retry: { delaySeconds: 0 } } })
  })

  it("a message handed back on its last allowed attempt is sent again and acked, never dead-lettered", async () => {
    const { platform, rows, consume } = setup()
    const last = RetryPolicy.batch.maxRetries + 1
    const { batch, settled } = batchOf("factline-batch", ["a", "b", "c", "d"].map((key) => ({ id: `m-${key}`, attempts: key === "d" ? last : 1, body: key })))
    await consume(batch)
    expect(settled.get("m-d")).toEqual({ ack: true })
    expect(rows()).toEqual({ a: 1, b: 1, c: 1 })
    // The same body back on the batch queue (a fresh message: its attempts start again), none on the DLQ.
    expect(platform.queues.get("factline-batch")!.sent).toEqual(["d"])
    expect(platform.queues.get(RetryPolicy.batch.deadLetterQueue)!.sent).toEqual([])
  })

  it("the batch's warn line says how many messages were handed back", async () => {
    const { platform } = setup()
    const { batch } = batchOf("factline-batch", ["a", "b", "c", "d", "e"].map((key) => ({ id: `m-${key}`, attempts: 1, body: key })))
    const lines: Array<string> = []
    const warned = vi.spyOn(console, "warn").mockImplementation((line: unknown) => void lines.push(String(line)))
    try {
      await platform.run(Consumer.run({ ...slowSpec(platform), log: "batch" }, batch).pipe(Effect.provideService(Deadline.Budget, 1_000), Effect.provide(TestClock.layer())))
    } finally {
      warned.mockRestore()
    }
    expect(lines.map((l) => JSON.parse(l))).toEqual([{
      level: "warn", message: "queue batch handed messages back before its time limit", queue: "factline-batch",
      messages: 5, handed_back: 2, elapsed_ms: 1_200, budget_ms: 1_000
    }])
  })

  it("outside a consumer no deadline has passed", async () => {
    const passed = await Effect.runPromise(Deadline.passed.pipe(Effect.provide(Layer.empty)))
    expect(passed).toBe(false)
  })
})

describe("a processing attempt's log line", () => {
  it("carries the envelope's source and the queue delay (seed 003's source, queue_timestamp, processing_delay_ms)", () => {
    const line = JSON.parse(Consumer.attemptLine(
      { queue: "factline-events" },
      { id: "m1", attempts: 2, timestamp: new Date("2026-11-24T03:00:00.000Z"), body: { idempotency_key: "k1", message_type: "call.completed", source: "billing-service", tenant_id: "tenant-a" } },
      Date.parse("2026-11-24T03:00:02.500Z"),
      "retried", "transient", "try later"
    ))
    expect(line).toMatchObject({
      outcome: "retried", source: "billing-service", queue_timestamp: "2026-11-24T03:00:00.000Z", processing_delay_ms: 2_500, idempotency_key: "k1"
    })
  })
})
