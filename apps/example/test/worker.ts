/** The Worker under test: the example's modules plus test-only handlers. */
import { makePlatform } from "@factline/workers"
import { modules } from "../src/modules.js"
import * as Drain from "./Drain.js"
import { testModule } from "./TestModule.js"

export { LedgerShard } from "@factline/workers"

export const platform = makePlatform([...modules, testModule])
// The runtime's entry: its queue handler also settles the messages `drain()` counts (tests call `platform.queue` directly).
export default { ...platform, queue: Drain.consumer(platform.queue) }
