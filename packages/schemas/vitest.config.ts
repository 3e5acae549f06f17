import { defineConfig } from "vitest/config"
import { nodeTestRuns } from "../../scripts/NodeTestRuns.mjs"
import { workspaceSources } from "../../scripts/WorkspaceSources.mjs"

export default defineConfig({
  // @factline/* resolve to their TypeScript sources, not dist/ (see scripts/WorkspaceSources.mjs).
  plugins: [workspaceSources()],
  test: {
    include: ["src/**/*.test.ts"],
    ...nodeTestRuns // two files at a time, the module graph kept between a worker's files
  }
})
