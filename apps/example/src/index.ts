/** The example platform Worker: its modules on factline. */
import { makePlatform } from "@factline/workers"
import { modules } from "./modules.js"

export { LedgerShard } from "@factline/workers"

export default makePlatform(modules)
