/**
 * How the workspace packages' Node unit tests (core, workers, client, schemas) schedule their files: two at a time,
 * each worker keeping its module graph between its files (`isolate: false`). vitest's default on 2 cores is one file
 * at a time, each importing the sources afresh, which was most of the run (docs/testing.md). Each file builds its own
 * layers and stores; the suites pass in shuffled orders (`--sequence.shuffle`).
 */
export const nodeTestRuns = { maxWorkers: 2, isolate: false }
