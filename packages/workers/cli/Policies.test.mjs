/** The CLI's copy of the queue table is RetryPolicy's, and the example's wrangler.jsonc passes its checks. */
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { PayloadStore } from "@factline/core"
import { RetryPolicy } from "@factline/core/runtime"
import * as Policies from "./Policies.ts"
import * as WranglerConfig from "./WranglerConfig.ts"

describe("the CLI's queue table", () => {
  it("is RetryPolicy.all, queue by queue", () => {
    expect(Policies.queues).toEqual(RetryPolicy.all.map((p) => ({
      queue: p.queue, ...(p.grouped ? { grouped: true } : {}), binding: p.binding, deadLetterQueue: p.deadLetterQueue, deadLetterBinding: p.deadLetterBinding,
      maxRetries: p.maxRetries, maxBatchSize: p.maxBatchSize, maxBatchTimeoutSeconds: p.maxBatchTimeoutSeconds,
      messageRetentionSeconds: p.messageRetentionSeconds, deadLetterRetentionSeconds: p.deadLetterRetentionSeconds
    })))
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
