// `npm run chaos`: the heavier fault cases (test/chaos/*.chaos.test.ts) in workerd with the same bindings as
// the tests; each case prints one `SCORECARD {json}` line that scripts/chaos.mjs gathers into the scorecard.
import { defineConfig, mergeConfig } from "vitest/config"
import base from "./vitest.config.js"

export default mergeConfig(base, defineConfig({
  // One case at a time (the tests' config runs two files at once): each case loads the machine on its own.
  test: { include: ["test/chaos/**/*.chaos.test.ts"], testTimeout: 600_000, hookTimeout: 120_000, maxWorkers: 1 }
}))
