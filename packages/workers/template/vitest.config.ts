// Integration tests inside workerd (test/**/*.workers.test.ts) with the app's own wrangler.jsonc: real local
// Queues, D1, Durable Objects and R2. The specs run in plain Node (vitest.node.config.ts).
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin"
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { defineConfig } from "vitest/config"

const migrations = await readD1Migrations("./migrations")
const testToken = "test-token"
const tokens = JSON.stringify([
  { name: "test", sha256: createHash("sha256").update(testToken).digest("hex"), tenant_id: "tenant-test", scopes: ["events:write", "read", "admin"] }
])

/** Each queue consumer as wrangler.jsonc declares it, with a 50 ms batch timeout so no hop waits on an unfilled batch. */
const { queues } = JSON.parse(readFileSync("./wrangler.jsonc", "utf8").replace(/^\s*\/\/.*$/gm, "")) as {
  queues: { consumers: Array<{ queue: string; max_batch_size: number; max_retries: number; dead_letter_queue?: string }> }
}
const queueConsumers = Object.fromEntries(queues.consumers.map((c) => [c.queue, {
  maxBatchSize: c.max_batch_size,
  maxBatchTimeout: 0.05,
  maxRetries: c.max_retries,
  ...(c.dead_letter_queue === undefined ? {} : { deadLetterQueue: c.dead_letter_queue })
}]))

export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.jsonc" },
      miniflare: {
        bindings: {
          TEST_MIGRATIONS: migrations,
          TEST_TOKEN: testToken,
          FACTLINE_TOKENS: tokens,
          FACTLINE_RETRY_DELAY_SCALE: "0",
          // What production records in the runs view (.dev.vars says `all` for `npm run dev`; the tests count round trips).
          FACTLINE_RUNS: "failures",
          FACTLINE_LOCAL_DEVELOPMENT: "true",
          FACTLINE_SECRETS_KEY: Buffer.alloc(32, 1).toString("base64")
        },
        queueConsumers
      }
    })
  ],
  test: { include: ["test/**/*.workers.test.ts"], setupFiles: ["./test/setup.ts"], testTimeout: 60_000, hookTimeout: 60_000 }
})
