/**
 * Every handler, decider and processor of the example's modules fed inputs drawn from their schemas
 * (PropertySpec: effect's Arbitrary, a fixed seed, 100 inputs each): each answers with facts it declares,
 * valid, or a typed failure — never a throw —, and the modules' projections map every fact they answer with.
 */
import { describe, it } from "vitest"
import { PropertySpec } from "@factline/core/testing"
import { modules } from "../src/modules.js"

describe("properties", () => {
  for (const module of modules) {
    it(`every handler and processor of ${module.name} answers drawn inputs with declared facts or a typed failure`, () => PropertySpec.check(module))
  }
})
