import type { D1Migration } from "cloudflare:test"

declare global {
  namespace Cloudflare {
    interface Env {
      DB: D1Database
      PAYLOADS: R2Bucket
      LEDGER: DurableObjectNamespace
      EVENTS_QUEUE: Queue
      EVENTS_DLQ: Queue
      FACTLINE_TOKENS: string
      FACTLINE_RETRY_DELAY_SCALE: string
      TEST_MIGRATIONS: D1Migration[]
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
