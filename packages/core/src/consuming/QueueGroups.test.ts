import { describe, expect, it } from "vitest"
import * as QueueGroups from "./QueueGroups.js"
import * as RetryPolicy from "./RetryPolicy.js"

describe("queue groups", () => {
  it("place a tenant in the same group every time, and spread tenants over every group", () => {
    expect(QueueGroups.groupOf("tenant-a", 4)).toBe(QueueGroups.groupOf("tenant-a", 4))
    const seen = new Set(Array.from({ length: 200 }, (_, i) => QueueGroups.groupOf(`tenant-${i}`, 4)))
    expect([...seen].sort()).toEqual([0, 1, 2, 3])
    expect(QueueGroups.groupOf("tenant-a", 1)).toBe(0)
  })

  it("route a grouped purpose to the tenant's group queue and leave every other queue as named", () => {
    const g = QueueGroups.groupOf("t1", 4)
    expect(QueueGroups.route("factline-events", "t1", 4)).toBe(`factline-events-${g}`)
    expect(QueueGroups.route("factline-projections", "t1", 4)).toBe(`factline-projections-${g}`)
    expect(QueueGroups.route("factline-fact-processing", "t1", 4)).toBe(`factline-fact-processing-${g}`)
    expect(QueueGroups.route("factline-webhooks", "t1", 4)).toBe("factline-webhooks")
    expect(QueueGroups.route("factline-events-dlq", "t1", 4)).toBe("factline-events-dlq")
    expect(QueueGroups.route("factline-events-2", "t1", 4)).toBe("factline-events-2")
  })

  it("read a group queue back as its purpose, policy and binding; group 0 keeps the purpose's binding", () => {
    expect(QueueGroups.purposeOf("factline-projections-3")).toBe("factline-projections")
    expect(QueueGroups.purposeOf("factline-projections-dlq")).toBe("factline-projections-dlq")
    expect(QueueGroups.purposeOf("factline-webhooks-1")).toBe("factline-webhooks-1")
    expect(RetryPolicy.forQueue("factline-events-3")).toBe(RetryPolicy.events)
    expect(RetryPolicy.forQueue("factline-events-x")).toBeUndefined()
    expect(QueueGroups.bindingOf("factline-events-0")).toBe("EVENTS_QUEUE")
    expect(QueueGroups.bindingOf("factline-events")).toBe("EVENTS_QUEUE")
    expect(QueueGroups.bindingOf("factline-events-2")).toBe("EVENTS_QUEUE_2")
    expect(QueueGroups.bindingOf("factline-events-dlq")).toBe("EVENTS_DLQ")
    expect(QueueGroups.bindingOf("factline-batch")).toBe("BATCH_QUEUE")
    expect(QueueGroups.bindingOf("nope")).toBeUndefined()
  })

  it("list every group queue of a grouped policy", () => {
    expect(QueueGroups.queuesOf(RetryPolicy.events, 3)).toEqual(["factline-events-0", "factline-events-1", "factline-events-2"])
    expect(QueueGroups.queuesOf(RetryPolicy.batch, 3)).toEqual(["factline-batch"])
  })
})
