import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin"
import { readFileSync } from "node:fs"
import { defineConfig } from "vitest/config"

const migrations = await readD1Migrations("../../migrations")
const tokens = readFileSync("./test/dev-tokens.json", "utf8").trim()

export default defineConfig({
  plugins: [
    cloudflareTest({
      // The example's own wrangler.jsonc (every queue, D1, R2, DO) with a test entry that adds test-only handlers.
      main: "./test/worker.ts",
      wrangler: { configPath: "./wrangler.jsonc" },
      miniflare: {
        bindings: {
          TEST_MIGRATIONS: migrations,
          FACTLINE_TOKENS: tokens,
          // Retries come back at once in tests; the policy itself is unchanged (configuration, not code).
          FACTLINE_RETRY_DELAY_SCALE: "0"
        }
      }
    })
  ],
  test: {
    include: ["test/**/*.workers.test.ts"],
    setupFiles: ["./test/setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
