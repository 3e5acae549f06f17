/**
 * The CLI's queue table is RetryPolicy's (Policies derives it): what init writes has every queue of the table with its
 * consumer settings, the checks hold a config to them, and the example's wrangler.jsonc passes the checks.
 */
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { PayloadStore } from "@factline/core"
import { QueueGroups, RetryPolicy } from "@factline/core/runtime"
import * as Policies from "./Policies.ts"
import * as WranglerConfig from "./WranglerConfig.ts"

describe("the CLI's queue table", () => {
  it("writes every queue of RetryPolicy.all (each group queue) and its DLQ, with the policy's consumer settings", () => {
    const groups = 3
    const { queues } = WranglerConfig.platformBindings({ databaseName: "db", bucketName: "b", queueGroups: groups })
    const expected = RetryPolicy.all.flatMap((p) => {
      const physical = p.grouped ? Array.from({ length: groups }, (_, g) => ({ queue: QueueGroups.queueName(p, g), binding: QueueGroups.bindingName(p, g) })) : [{ queue: p.queue, binding: p.binding }]
      return [
        ...physical.map((q) => ({ producer: q, consumer: { queue: q.queue, max_batch_size: p.maxBatchSize, max_batch_timeout: p.maxBatchTimeoutSeconds, max_retries: p.maxRetries, dead_letter_queue: p.deadLetterQueue } })),
        { producer: { queue: p.deadLetterQueue, binding: p.deadLetterBinding }, consumer: { queue: p.deadLetterQueue, max_batch_size: RetryPolicy.deadLetterConsumer.maxBatchSize, max_batch_timeout: RetryPolicy.deadLetterConsumer.maxBatchTimeoutSeconds, max_retries: RetryPolicy.deadLetterConsumer.maxRetries } }
      ]
    })
    expect(new Set(queues.producers.map((q) => JSON.stringify(q)))).toEqual(new Set(expected.map((e) => JSON.stringify(e.producer))))
    expect(new Set(queues.consumers.map((q) => JSON.stringify(q)))).toEqual(new Set(expected.map((e) => JSON.stringify(e.consumer))))
    // 3 grouped purposes × 3 groups + 2 ungrouped + 5 DLQs: a queue added to the table is written without an edit in the CLI.
    expect(queues.consumers).toHaveLength(RetryPolicy.all.reduce((n, p) => n + (p.grouped ? groups : 1) + 1, 0))
    expect(Policies.queues.map((q) => q.queue)).toEqual(RetryPolicy.all.map((p) => p.queue))
  })

  it("refuses a config that lacks a queue of the table, naming it", () => {
    const config = { name: "app", triggers: { crons: Policies.bindings.crons }, migrations: Policies.durableObjectMigrations, ...WranglerConfig.platformBindings({ databaseName: "db", bucketName: "b" }) }
    config.queues.consumers = config.queues.consumers.filter((c) => c.queue !== "factline-batch")
    config.queues.producers = config.queues.producers.filter((p) => p.queue !== "factline-batch")
    expect(WranglerConfig.check(config).join("\n")).toContain("factline-batch")
  })

  it("keeps every DLQ 14 days and every queue (each group queue) 4 days, RetryPolicy's retention", () => {
    for (const q of Policies.queues) {
      expect(Policies.retentionOf(q.deadLetterQueue), q.deadLetterQueue).toBe(14 * 86_400)
      for (const p of Policies.physicalQueues(q)) expect(Policies.retentionOf(p.queue), p.queue).toBe(RetryPolicy.forQueue(p.queue).messageRetentionSeconds)
    }
    expect(Policies.retentionOf("factline-events-3")).toBe(4 * 86_400)
    expect(Policies.retentionOf("someone-elses-queue")).toBeUndefined()
    expect(Policies.retentionText(1_209_600)).toBe("14 days")
  })

  it("has RetryPolicy's dead-letter consumer settings, and the checks hold a DLQ consumer to its max_retries", () => {
    expect(Policies.deadLetterConsumer).toEqual({ ...RetryPolicy.deadLetterConsumer })
    const config = { name: "app", triggers: { crons: Policies.bindings.crons }, migrations: Policies.durableObjectMigrations, ...WranglerConfig.platformBindings({ databaseName: "db", bucketName: "b" }) }
    config.queues.consumers.find((c) => c.queue === "factline-batch-dlq").max_retries = 3
    expect(WranglerConfig.check(config)).toEqual(["queues.consumers[factline-batch-dlq].max_retries is 3, the policy says 10"])
  })

  it("expires the prefix core's PayloadStore offloads payloads under, and nothing a tenant keeps", () => {
    expect(Policies.payloads.prefix).toBe(PayloadStore.payloadsPrefix)
    expect(PayloadStore.payloadKey("tenant-a", "p_1")).toBe("_payloads/tenant-a/p_1")
    // No tenant id (a letter or digit first) can start with the prefix: the rule never reaches a tenant's archive.
    expect(/^[A-Za-z0-9]/.test(Policies.payloads.prefix)).toBe(false)
  })

  it("generates bindings that pass the checks, and the checks name what is missing or wrong", () => {
    const config = { name: "app", triggers: { crons: Policies.bindings.crons }, migrations: Policies.durableObjectMigrations, ...WranglerConfig.platformBindings({ databaseName: "db", bucketName: "b" }) }
    expect(WranglerConfig.check(config)).toEqual([])
    const broken = structuredClone(config)
    broken.queues.consumers[0].max_retries = 3
    broken.queues.producers = broken.queues.producers.filter((p) => p.queue !== "factline-webhooks-dlq")
    broken.vars = { FACTLINE_LOCAL_DEVELOPMENT: "true" }
    expect(WranglerConfig.check(broken, { deployed: true })).toEqual([
      'queues.consumers[factline-events-0].max_retries is 3, the policy says 5',
      'queues.producers: missing { queue: "factline-webhooks-dlq", binding: "WEBHOOKS_DLQ" }',
      "vars.FACTLINE_LOCAL_DEVELOPMENT is set: local development only, never in a deployed environment"
    ])
  })

  it("holds the rate limits to a 10 s period and binds every tier FACTLINE_RATE_LIMIT_TIERS names", () => {
    const config = { name: "app", triggers: { crons: Policies.bindings.crons }, migrations: Policies.durableObjectMigrations, ...WranglerConfig.platformBindings({ databaseName: "db", bucketName: "b" }) }
    config.ratelimits = [{ name: "FACTLINE_RATE_LIMIT", namespace_id: "1", simple: { limit: 100, period: 60 } }]
    config.vars = { FACTLINE_RATE_LIMIT_TIERS: JSON.stringify({ "*": "default", acme: "bulk", ops: "unlimited" }) }
    expect(WranglerConfig.check(config)).toEqual([
      "ratelimits[FACTLINE_RATE_LIMIT].simple.period is 60: factline's rate limits count per 10 s (the Retry-After its 429 answers)",
      'ratelimits: missing FACTLINE_RATE_LIMIT_BULK (tier "bulk" of vars.FACTLINE_RATE_LIMIT_TIERS)'
    ])
    config.ratelimits = [{ name: "FACTLINE_RATE_LIMIT", namespace_id: "1", simple: { limit: 100, period: 10 } }, { name: "FACTLINE_RATE_LIMIT_BULK", namespace_id: "2", simple: { limit: 1000, period: 10 } }]
    expect(WranglerConfig.check(config)).toEqual([])
  })

  it("passes the example's wrangler.jsonc, top level and every environment", () => {
    const config = WranglerConfig.parseJsonc(readFileSync(new URL("../../../apps/example/wrangler.jsonc", import.meta.url), "utf8"))
    expect(WranglerConfig.check(WranglerConfig.forEnv(config))).toEqual([])
    for (const env of Object.keys(config.env ?? {})) expect(WranglerConfig.check(WranglerConfig.forEnv(config, env), { deployed: true }), env).toEqual([])
  })
})
