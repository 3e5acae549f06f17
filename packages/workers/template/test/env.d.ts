import type { D1Migration } from "cloudflare:test"

declare global {
  namespace Cloudflare {
    interface Env {
      DB: D1Database
      TEST_MIGRATIONS: D1Migration[]
      /** A token valid in tests only (vitest.config.ts puts its hash in FACTLINE_TOKENS). */
      TEST_TOKEN: string
    }
    interface GlobalProps {
      mainModule: typeof import("../src/index.js")
    }
  }
}
export {}
