import { describe, expect, it } from "vitest"
import pkg from "../../package.json" with { type: "json" }
import { Health as HealthApi } from "@factline/core/api"

describe("GET /health", () => {
  it("reports the package's own version", () => {
    expect(HealthApi.version).toBe(pkg.version)
  })
})
