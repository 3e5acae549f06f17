import { applyD1Migrations } from "cloudflare:test"
import { env } from "cloudflare:workers"

// The same migrations `npm run dev` and `npm run deploy` apply (read by vitest.config.ts).
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS)
