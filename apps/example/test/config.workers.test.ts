import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { QueueGroups, RetryPolicy } from "@factline/core/runtime"
// The example's wrangler config, parsed as JSONC at build time by the test bundler would be fragile; read the raw text.
import wranglerText from "../wrangler.jsonc?raw"

const parseJsonc = (text: string) => JSON.parse(text.replace(/^\s*\/\/.*$/gm, ""))

describe("wrangler.jsonc matches the retry policies", () => {
  const config = parseJsonc(wranglerText)
  // The groups wrangler.jsonc declares (its FACTLINE_QUEUE_GROUPS, else the default); the tests' own setting (1) only
  // changes where the app routes, not which queues exist.
  const groups = Number(config.vars?.FACTLINE_QUEUE_GROUPS ?? QueueGroups.defaultGroups)
  it.each(RetryPolicy.all.map((p) => [p.queue, p] as const))("%s consumer settings come from its policy", (_, policy) => {
    // A grouped purpose is one queue per tenant group (factline-events-0 …), each with the purpose's settings; nothing else serves it.
    const queues = QueueGroups.queuesOf(policy, groups)
    expect(queues).toHaveLength(policy.grouped ? groups : 1)
    expect(config.queues.consumers.filter((c: any) => QueueGroups.purposeOf(c.queue) === policy.queue).map((c: any) => c.queue)).toEqual(queues)
    const producers = config.queues.producers.map((p: any) => `${p.queue}=${p.binding}`)
    for (const queue of queues) {
      const consumer = config.queues.consumers.find((c: any) => c.queue === queue)
      expect(consumer).toEqual({
        queue,
        max_retries: policy.maxRetries,
        max_batch_size: policy.maxBatchSize,
        max_batch_timeout: policy.maxBatchTimeoutSeconds,
        dead_letter_queue: policy.deadLetterQueue
      })
      expect(producers).toContain(`${queue}=${QueueGroups.bindingOf(queue)}`)
    }
    expect(producers).toContain(`${queues[0]}=${policy.binding}`)
    expect(producers).toContain(`${policy.deadLetterQueue}=${policy.deadLetterBinding}`)
    // Its DLQ (one per purpose) is consumed (persisted to dead_messages) too.
    expect(config.queues.consumers.some((c: any) => c.queue === policy.deadLetterQueue)).toBe(true)
  })
})

describe("the D1 tables written on every event", () => {
  it.each(["facts", "projection_applied", "accepted_keys", "calls"])("%s is stored WITHOUT ROWID (one row written per insert)", async (table) => {
    const row = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").bind(table).first<{ sql: string }>()
    expect(row?.sql).toMatch(/WITHOUT ROWID\s*$/)
  })
})

describe("wrangler.jsonc binds the workflows the modules declare", () => {
  const config = parseJsonc(wranglerText)
  it("the registry has workflows and every environment binds FACTLINE_WORKFLOWS of class FactlineWorkflow (not inherited)", async () => {
    const { modules } = await import("../src/modules.js")
    expect(modules.flatMap((m) => m.workflows).map((w) => w.name)).toContain("crm-sync")
    const wanted = [{ name: "factline-workflows", binding: "FACTLINE_WORKFLOWS", class_name: "FactlineWorkflow" }]
    expect(config.workflows).toEqual(wanted)
    for (const name of Object.keys(config.env ?? {})) expect(config.env[name].workflows, `env.${name}`).toEqual(wanted)
  })
})
