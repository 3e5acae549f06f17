// The example's specs in plain Node (`test/**/*.spec.ts`): pure logic on the in-memory platform of
// @factline/core/testing. The workerd integration tests have their own config (vitest.config.ts).
import { defineConfig } from "vitest/config"
import { workspaceSources } from "../../scripts/WorkspaceSources.mjs"

export default defineConfig({
  // @factline/* resolve to their TypeScript sources, not dist/ (see scripts/WorkspaceSources.mjs).
  plugins: [workspaceSources()],
  test: {
    include: ["test/**/*.spec.ts", "test/**/*.node.test.mjs"],
    environment: "node",
    // Two files at a time (vitest's default on 2 cores is one): the two slow files (scaffold, schema-versions)
    // spend most of their time in child processes (the CLI, tsc, a nested vitest), so they overlap well.
    maxWorkers: 2
  }
})
