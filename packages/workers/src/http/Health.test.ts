import { describe, expect, it } from "vitest"
import pkg from "../../package.json" with { type: "json" }
import * as Health from "./Health.js"

describe("GET /health", () => {
  it("reports the package's own version", () => {
    expect(Health.version).toBe(pkg.version)
  })
})
