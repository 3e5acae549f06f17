import type { D1Migration } from "cloudflare:test"
import type { LedgerShard } from "@factline/workers"

declare global {
  namespace Cloudflare {
    interface Env {
      DB: D1Database
      /** Read database 1 (read database 0 is DB): tenants placed there keep their read side in it. */
      FACTLINE_READ_DB_1: D1Database
      PAYLOADS: R2Bucket
      LEDGER: DurableObjectNamespace<LedgerShard>
      EVENTS_QUEUE: Queue
      EVENTS_DLQ: Queue
      WEBHOOKS_QUEUE: Queue
      /** The static assets (wrangler.jsonc `assets`): the dashboard and /docs. */
      ASSETS: Fetcher
      FACTLINE_TOKENS: string
      FACTLINE_RETRY_DELAY_SCALE: string
      TEST_MIGRATIONS: D1Migration[]
      /** Queue producer binding name → queue name (from wrangler.jsonc, for test/Drain.ts). */
      TEST_QUEUE_PRODUCERS: Record<string, string>
      /** Queue name → the consumer settings the local broker runs with in tests (for test/Drain.ts). */
      TEST_QUEUE_CONSUMERS: Record<string, { maxBatchSize: number; maxBatchTimeout: number; maxRetries: number; deadLetterQueue?: string }>
      /** The tests' real webhook receiver (scripts/Receiver.mjs), started by vitest.config.ts. */
      TEST_RECEIVER_URL: string
      /** The tests' OTLP/HTTP collector (scripts/OtlpReceiver.mjs): spans go there only where a test sets FACTLINE_OTLP_ENDPOINT. */
      TEST_OTLP_URL: string
      /** scripts/StateFiles.mjs: GET /grep?needle=… over Miniflare's raw state files. */
      TEST_STATE_FILES_URL: string
      /** The crm module's CRM stand-in (scripts/CrmReceiver.mjs), started by vitest.config.ts. */
      CRM_URL: string
      [binding: string]: unknown
    }
  }
}
export {}

declare global {
  namespace Cloudflare {
    interface GlobalProps {
      mainModule: typeof import("./worker.js")
    }
  }
}
