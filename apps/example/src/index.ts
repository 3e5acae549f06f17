/** The example platform Worker: its modules on factline. */
import { makePlatform } from "@factline/workers"
import { modules } from "./modules.js"

export { EndpointLimiter, FactlineWorkflow, LedgerShard } from "@factline/workers"

export default makePlatform(modules)
