import { defineConfig } from "vitest/config"
import { nodeTestRuns } from "../../scripts/NodeTestRuns.mjs"
import { workspaceSources } from "../../scripts/WorkspaceSources.mjs"

export default defineConfig({
  // @factline/* resolve to their TypeScript sources, not dist/ (see scripts/WorkspaceSources.mjs).
  plugins: [workspaceSources()],
  // Node: the HTTP auth table and the CLI (init, tokens, deploy's plan and checks).
  test: {
    include: ["src/**/*.test.ts", "cli/**/*.test.mjs"],
    environment: "node",
    testTimeout: 60_000,
    ...nodeTestRuns // two files at a time, the module graph kept between a worker's files
  }
})
