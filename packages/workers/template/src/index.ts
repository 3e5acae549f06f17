/** The platform Worker: the app's modules on factline (HTTP API, queue consumers, cron, the ledger and endpoint limiter Durable Objects). */
import { makePlatform } from "@factline/workers"
import { modules } from "./modules.js"

export { EndpointLimiter, LedgerShard } from "@factline/workers"

export default makePlatform(modules)
