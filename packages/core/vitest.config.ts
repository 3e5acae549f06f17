import { defineConfig } from "vitest/config"
import { workspaceSources } from "../../scripts/WorkspaceSources.mjs"

export default defineConfig({
  // @factline/* resolve to their TypeScript sources, not dist/ (see scripts/WorkspaceSources.mjs).
  plugins: [workspaceSources()],
  test: {
    include: ["src/**/*.test.ts"],
    // Two files at a time in one worker each, the module graph kept between a worker's files (isolate: false):
    // vitest's default on 2 cores is one file at a time, each importing the sources afresh — most of the run.
    // Each file builds its own layers and stores; the suite passes in shuffled orders (--sequence.shuffle).
    maxWorkers: 2,
    isolate: false
  }
})
