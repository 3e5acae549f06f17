import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin"
import { readFileSync } from "node:fs"
import { defineConfig } from "vitest/config"

import { build as buildAssets } from "../../packages/workers/dashboard/build.mjs"
import { workspaceSources } from "../../scripts/WorkspaceSources.mjs"
import * as Receiver from "./scripts/Receiver.mjs" // the webhook receiver the tests deliver to (plain .mjs)
import * as OtlpReceiver from "./scripts/OtlpReceiver.mjs" // the OTLP/HTTP collector otlp.workers.test.ts exports spans to
import * as CrmReceiver from "./scripts/CrmReceiver.mjs" // the CRM the crm-sync workflow writes to (crm-sync.workers.test.ts)
import * as StateFiles from "./scripts/StateFiles.mjs" // greps Miniflare's raw state files (personal-data.workers.test.ts)

// wrangler.jsonc's `assets` (the dashboard and /docs), built from their current source: the pool needs the directory.
await buildAssets()
const migrations = await readD1Migrations("../../migrations")
/** A real HTTP receiver for webhook deliveries, listening for as long as the test run. */
const receiver = await Receiver.start()
/** A local OTLP/HTTP (JSON) collector: spans are exported only by the test that sets FACTLINE_OTLP_ENDPOINT to it. */
const otlpReceiver = await OtlpReceiver.start()
/** The local CRM stand-in: counts every request and every effect by idempotency key, fails on command. */
const crmReceiver = await CrmReceiver.start()
/** Greps the running Miniflare instances' raw state files (SQLite pages, blobs) for a value: what erasure cannot reach. */
const stateFiles = await StateFiles.start()
const tokens = readFileSync("./test/dev-tokens.json", "utf8").trim()

interface WranglerQueues {
  readonly producers: ReadonlyArray<{ readonly queue: string; readonly binding: string }>
  readonly consumers: ReadonlyArray<{
    readonly queue: string
    readonly max_batch_size: number
    readonly max_batch_timeout: number
    readonly max_retries: number
    readonly dead_letter_queue?: string
  }>
}
const { queues } = JSON.parse(readFileSync("./wrangler.jsonc", "utf8").replace(/^\s*\/\/.*$/gm, "")) as { queues: WranglerQueues }

/**
 * Test-only batch timeout (seconds). wrangler.jsonc waits up to 1 s (5-10 s on webhooks, batch and the DLQs)
 * for a batch to fill; locally that is pure waiting at every hop. The broker still gathers whatever arrives
 * within 50 ms into one batch, up to the queue's own max_batch_size.
 */
const testBatchTimeoutSeconds = 0.05
/** Every consumer of wrangler.jsonc as the local broker runs it in tests: its own size, retries and DLQ, the short timeout. */
const queueConsumers = Object.fromEntries(queues.consumers.map((c) => [c.queue, {
  maxBatchSize: c.max_batch_size,
  maxBatchTimeout: testBatchTimeoutSeconds,
  maxRetries: c.max_retries,
  ...(c.dead_letter_queue === undefined ? {} : { deadLetterQueue: c.dead_letter_queue })
}]))

/** The pool: the example's Worker in Miniflare, an isolate trusting a tenant's placement for `placementCacheSeconds`. */
const workersPool = (placementCacheSeconds: number) =>
  cloudflareTest({
    // The example's own wrangler.jsonc (every queue, D1, R2, DO) with a test entry that adds test-only handlers.
    main: "./test/worker.ts",
    wrangler: { configPath: "./wrangler.jsonc" },
    miniflare: {
      bindings: {
        TEST_MIGRATIONS: migrations,
        FACTLINE_TOKENS: tokens,
        // Retries come back at once in tests; the policy itself is unchanged (configuration, not code).
        FACTLINE_RETRY_DELAY_SCALE: "0",
        // What production records in the runs view (.dev.vars says `all` for `npm run dev`; the tests count round trips).
        FACTLINE_RUNS: "failures",
        // One log line per processing attempt would print thousands of lines per run: only retries and dead letters.
        FACTLINE_LOG_ATTEMPTS: "failures",
        // Every consumer batch writes its metrics at once (production keeps clean batches' metrics in the isolate
        // up to 10 s): the tests count round trips per batch and read the rollup right after a drain. The deferral
        // is specified in core's Metrics.test.ts and metrics.workers.test.ts.
        FACTLINE_METRICS_FLUSH_SECONDS: "0",
        // One tenant group: every tenant's events on factline-events-0 (bound as EVENTS_QUEUE), so the tests that
        // swap a queue binding (PROJECTIONS_QUEUE: down) reach every tenant; the grouped routing is specified in
        // core's QueueGroups.test.ts and measured by the bench's noisy-neighbour run with the default 4 groups.
        FACTLINE_QUEUE_GROUPS: "1",
        // New tenants on read database 0 (DB itself): the tests read each tenant's rows from env.DB; the ones
        // about placement put a tenant on FACTLINE_READ_DB_1 themselves (PUT /v1/tenants/{tenant}/placement).
        FACTLINE_READ_DBS_OPEN: "0",
        // How long an isolate trusts a tenant's placement (production: 30 s): see `placementFiles` below.
        FACTLINE_PLACEMENT_CACHE_SECONDS: String(placementCacheSeconds),
        // What test/Drain.ts needs to count messages in flight: which binding sends to which queue, and
        // how the broker retries and dead-letters on each.
        TEST_QUEUE_PRODUCERS: Object.fromEntries(queues.producers.map((p) => [p.binding, p.queue])),
        TEST_QUEUE_CONSUMERS: queueConsumers,
        TEST_RECEIVER_URL: receiver.url,
        TEST_OTLP_URL: otlpReceiver.url,
        TEST_STATE_FILES_URL: stateFiles.url,
        // The crm module's CRM (its CrmClient), and a dispute window short enough to take both paths in a test.
        CRM_URL: crmReceiver.url,
        CRM_DISPUTE_WINDOW: "6 seconds",
        // Local development only: webhook endpoints may be http and loopback (the receiver above).
        FACTLINE_LOCAL_DEVELOPMENT: "true",
        FACTLINE_SECRETS_KEY: "kL8hXw6QkGfCq0e3m1Vn2m4Qb7yT9uR5sD3aF1gH2jM="
      },
      // Replaces wrangler.jsonc's consumers queue by queue (miniflare merges per queue name).
      queueConsumers,
      // Rate limits (merged by binding name over wrangler.jsonc's): the default tier far above what any test sends
      // (the hostile sweeps send thousands of requests as one tenant), and two small tiers rate-limit.workers.test.ts
      // puts its own tenants on (FACTLINE_RATE_LIMIT_TIERS) to trip them with a handful of requests.
      ratelimits: {
        FACTLINE_RATE_LIMIT: { namespace_id: "1001", simple: { limit: 1_000_000, period: 10 } },
        FACTLINE_RATE_LIMIT_TEST_TIGHT: { namespace_id: "9001", simple: { limit: 3, period: 10 } },
        FACTLINE_RATE_LIMIT_TEST_RAISED: { namespace_id: "9002", simple: { limit: 6, period: 10 } }
      }
    }
  })

/**
 * The files about moving or deleting a tenant's read side wait, twice per move, until no isolate can still trust
 * the placement it cached (plus `Move.settleMs`): they run in their own project where an isolate trusts it for 2 s.
 * Every other file trusts it for 10 s, long enough that the tests counting round trips per batch never see a
 * placement read again (none of these four counts round trips).
 */
const placementFiles = ["move", "projection-move", "projection-parts", "tenant-deletion"].map((name) => `test/${name}.workers.test.ts`)

export default defineConfig({
  // @factline/* resolve to their TypeScript sources, not dist/ (see scripts/WorkspaceSources.mjs).
  plugins: [workspaceSources()],
  test: {
    projects: [
      { extends: true, plugins: [workersPool(10)], test: { name: "workers", include: ["test/**/*.workers.test.ts"], exclude: placementFiles } },
      { extends: true, plugins: [workersPool(2)], test: { name: "placement", include: placementFiles } }
    ],
    setupFiles: ["./test/setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two test files at a time, each still in its own Miniflare (fresh D1, Durable Objects, R2, queues and
    // Workflows per file: `isolate` stays on). Most of a file's time is its start-up (the pool's Miniflare, the
    // Worker's whole module graph fetched from vitest and evaluated in workerd, the migrations) and waits on the
    // local broker, neither of which fills a core; vitest's default on 2 cores is one file at a time
    // (availableParallelism − 1). Measured on the shared 2-core host: 1,626 s one at a time, 736 s two at a time
    // (fewer files then). Three at a time took 443 s for today's 69 files on a quiet host, but two timing-bound
    // tests (a 2-second timer, a 2-per-second endpoint's spacing) failed in a CI run at three: kept at two.
    maxWorkers: 2
  }
})
