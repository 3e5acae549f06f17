import { applyD1Migrations } from "cloudflare:test"
import { env } from "cloudflare:workers"
import * as Drain from "./Drain.js"

await applyD1Migrations(env.DB, env.TEST_MIGRATIONS)
// Before any test sends: every queue message from here on is counted for `drain()`.
Drain.install(env)
