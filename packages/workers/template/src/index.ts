/** The platform Worker: the app's modules on factline (HTTP API, queue consumers, cron, the ledger Durable Object). */
import { makePlatform } from "@factline/workers"
import { modules } from "./modules.js"

export { LedgerShard } from "@factline/workers"

export default makePlatform(modules)
