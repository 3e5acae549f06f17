/** The Worker under test: the example's modules plus test-only handlers. */
import { makePlatform } from "@factline/workers"
import { modules } from "../src/modules.js"
import { testModule } from "./TestModule.js"

export { LedgerShard } from "@factline/workers"

export const platform = makePlatform([...modules, testModule])
export default platform
