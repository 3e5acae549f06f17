import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { RetryPolicy } from "@factline/core"
// The example's wrangler config, parsed as JSONC at build time by the test bundler would be fragile; read the raw text.
import wranglerText from "../wrangler.jsonc?raw"

const parseJsonc = (text: string) => JSON.parse(text.replace(/^\s*\/\/.*$/gm, ""))

describe("wrangler.jsonc matches the retry policies", () => {
  const config = parseJsonc(wranglerText)
  it.each(RetryPolicy.all.map((p) => [p.queue, p] as const))("%s consumer settings come from its policy", (_, policy) => {
    const consumer = config.queues.consumers.find((c: any) => c.queue === policy.queue)
    expect(consumer).toEqual({
      queue: policy.queue,
      max_retries: policy.maxRetries,
      max_batch_size: policy.maxBatchSize,
      max_batch_timeout: policy.maxBatchTimeoutSeconds,
      dead_letter_queue: policy.deadLetterQueue
    })
    const producers = config.queues.producers.map((p: any) => `${p.queue}=${p.binding}`)
    expect(producers).toContain(`${policy.queue}=${policy.binding}`)
    expect(producers).toContain(`${policy.deadLetterQueue}=${policy.deadLetterBinding}`)
    // Its DLQ is consumed (persisted to dead_messages) too.
    expect(config.queues.consumers.some((c: any) => c.queue === policy.deadLetterQueue)).toBe(true)
  })
})

describe("the D1 tables written on every event", () => {
  it.each(["facts", "projection_applied", "accepted_keys", "calls"])("%s is stored WITHOUT ROWID (one row written per insert)", async (table) => {
    const row = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").bind(table).first<{ sql: string }>()
    expect(row?.sql).toMatch(/WITHOUT ROWID\s*$/)
  })
})
