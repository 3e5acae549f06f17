import * as Effect from "effect/Effect"
import { describe, expect, it } from "vitest"
import * as MetricsTally from "../operations/MetricsTally.js"
import { memoryQueue, type MemoryQueue } from "../testing/MemoryBindings.js"
import * as TestPlatform from "../testing/TestPlatform.js"
import * as Queues from "./Queues.js"

/** The door over one in-memory queue (which refuses a call over Cloudflare's limits), counting what it is told. */
const doorOver = (queue: MemoryQueue, name = "q") => {
  const counted: Array<[string, number]> = []
  let calls = 0
  const binding: Queues.QueueBinding = {
    sendBatch: (messages, options) => (calls++, queue.sendBatch(messages, options)),
    metrics: () => queue.metrics()
  }
  const door = Queues.make((n) => (n === name ? binding : undefined), { count: (q, n) => void counted.push([q, n]) })
  return { door, counted, calls: () => calls }
}

const pad = (bytes: number, i: number) => ({ i, pad: "x".repeat(bytes) })

describe("Queues.send", () => {
  it("250 small messages: three calls of 100, 100 and 50, every message on the queue once, in order, each call counted", async () => {
    const queue = memoryQueue()
    const { door, counted, calls } = doorOver(queue)
    const bodies = Array.from({ length: 250 }, (_, i) => ({ i }))
    const sent = await Effect.runPromise(door.send("q", bodies))
    expect(sent).toEqual({ messages: 250, calls: 3 })
    expect(calls()).toBe(3)
    expect(queue.sent).toEqual(bodies)
    expect(counted).toEqual([["q", 100], ["q", 100], ["q", 50]])
  })

  it("messages of 100 KB go two to a call (256 KB a call), where one call of all would be refused", async () => {
    const queue = memoryQueue()
    const bodies = Array.from({ length: 5 }, (_, i) => pad(100_000, i))
    await expect(queue.sendBatch(bodies.map((body) => ({ body })))).rejects.toThrow(/exceeds limit/)
    const { door, calls } = doorOver(queue)
    expect(await Effect.runPromise(door.send("q", bodies))).toEqual({ messages: 5, calls: 3 })
    expect(calls()).toBe(3)
    expect(queue.sent).toEqual(bodies)
  })

  it("a message over 128 KB is refused before any call: nothing sent, nothing counted", async () => {
    const queue = memoryQueue()
    const { door, counted, calls } = doorOver(queue)
    const failure = await Effect.runPromise(Effect.flip(door.send("q", [pad(10, 0), pad(130_000, 1)])))
    expect(failure).toBeInstanceOf(Queues.SendFailed)
    expect(failure).toMatchObject({ queue: "q", sent: 0, notSent: 2, calls: 0, status: 503, retryable: true })
    expect(failure.message).toMatch(/message 1 is \d+ bytes, over the queue's 128000-byte limit/)
    expect([queue.sent.length, calls(), counted.length]).toEqual([0, 0, 0])
  })

  it("a call that fails stops the send: the failure says how many messages, in order, are on the queue; only they are counted", async () => {
    const queue = memoryQueue()
    let call = 0
    const refusingSecond: Queues.QueueBinding = {
      sendBatch: (messages, options) => (++call === 2 ? Promise.reject(new Error("queue unavailable")) : queue.sendBatch(messages, options)),
      metrics: () => queue.metrics()
    }
    const counted: Array<number> = []
    const door = Queues.make(() => refusingSecond, { count: (_, n) => void counted.push(n) })
    const bodies = Array.from({ length: 250 }, (_, i) => ({ i }))
    const failed = await Effect.runPromise(Effect.flip(door.send("q", bodies)))
    expect(failed).toMatchObject({ _tag: "QueueSendIncomplete", queue: "q", message: "queue unavailable", sent: 100, notSent: 150, calls: 2 })
    expect(failed.publicMessage).toBe("the q queue is unavailable, retry later")
    expect(call).toBe(2)
    expect(queue.sent).toEqual(bodies.slice(0, 100))
    expect(counted).toEqual([100])
  })

  it("delays: one for every message, or each message's own; 0 sends at once", async () => {
    const queue = memoryQueue()
    const { door } = doorOver(queue)
    await Effect.runPromise(door.send("q", [{ a: 1 }, { a: 2 }], { delaySeconds: 30 }))
    await Effect.runPromise(door.send("q", [{ b: 1 }, { b: 2 }, { b: 3 }], { delaySeconds: (i) => i * 10 }))
    expect(queue.requests.map((r) => r.delaySeconds)).toEqual([30, 30, 0, 10, 20])
  })

  it("a queue not bound fails naming it; no bodies make no call", async () => {
    const queue = memoryQueue()
    const { door, calls } = doorOver(queue)
    expect(await Effect.runPromise(door.send("q", []))).toEqual({ messages: 0, calls: 0 })
    expect(await Effect.runPromise(Effect.flip(door.send("other", [{ x: 1 }])))).toMatchObject({ queue: "other", message: "no producer binding for queue other", sent: 0, notSent: 1 })
    expect([door.bound("q"), door.bound("other"), calls()]).toEqual([true, false, 0])
  })

  it("the platform's door counts every message it sent into the runtime's tally, under the queue's purpose", async () => {
    const platform = TestPlatform.make([], { settings: { FACTLINE_QUEUE_GROUPS: "4" } })
    await platform.run(Effect.gen(function*() {
      const queues = yield* Queues.Queues
      yield* queues.send(queues.route("factline-events", "tenant-a"), Array.from({ length: 150 }, (_, i) => ({ i })))
      yield* queues.send("factline-events-dlq", [{ dead: 1 }])
    }))
    const tally = await platform.run(Effect.service(MetricsTally.MetricsTally))
    expect(Object.fromEntries(tally.drain())).toEqual({ "factline-events": 150, "factline-events-dlq": 1 })
    const onGroupQueues = [0, 1, 2, 3].map((g) => platform.queues.get(`factline-events-${g}`)!.sent.length)
    expect(onGroupQueues.reduce((a, b) => a + b, 0)).toBe(150)
    expect(onGroupQueues.filter((n) => n > 0)).toEqual([150])
  })
})
