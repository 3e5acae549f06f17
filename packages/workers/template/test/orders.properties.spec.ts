/**
 * The orders module fed inputs drawn from its schemas (`npm run test:specs`): every handler, decider and
 * processor answers with facts it declares, valid, or a typed failure (PermanentError, TransientError) —
 * never a throw —, and the module's projections map every fact they answer with. A failure names the code,
 * the input (shrunk) and the line that threw. Same inputs on every run (a fixed seed); `runs` draws more.
 * `factline new:module` writes one of these for each module it scaffolds.
 */
import { it } from "vitest"
import { PropertySpec } from "@factline/core/testing"
import { orders } from "../src/orders/Orders.js"

it("every handler and processor of orders answers drawn inputs with declared facts or a typed failure, never a throw", () =>
  PropertySpec.check(orders, { runs: 100 }))
