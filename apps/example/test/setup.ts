import { applyD1Migrations } from "cloudflare:test"
import { env } from "cloudflare:workers"
import * as Drain from "./Drain.js"

// Every database gets the same migrations: the platform database and each read database.
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS)
await applyD1Migrations(env.FACTLINE_READ_DB_1, env.TEST_MIGRATIONS)
// Before any test sends: every queue message from here on is counted for `drain()`.
Drain.install(env)
