/** The example platform Worker: the calls module on factline. */
import { makePlatform } from "@factline/workers"
import { calls } from "./calls/Calls.js"

export { LedgerShard } from "@factline/workers"

export default makePlatform([calls])
