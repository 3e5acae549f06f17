/** The Worker under test: the example's modules plus test-only handlers. */
import { makePlatform } from "@factline/workers"
import { calls } from "../src/calls/Calls.js"
import { testModule } from "./TestModule.js"

export { LedgerShard } from "@factline/workers"

export const platform = makePlatform([calls, testModule])
export default platform
