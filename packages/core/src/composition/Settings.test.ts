import { ConfigProvider, Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as Settings from "./Settings.js"

const read = (vars: Record<string, string>) => Effect.runSync(Settings.config.parse(ConfigProvider.fromUnknown(vars)))

describe("Settings: FACTLINE_RATE_LIMIT_TIERS", () => {
  it("without it, every tenant is on the default tier", () => {
    expect(read({}).rateLimitTiers).toEqual({ fallback: "default", tenants: new Map() })
  })

  it("\"*\" sets the default of every tenant it does not name; named tenants get their own tier", () => {
    expect(read({ FACTLINE_RATE_LIMIT_TIERS: '{ "*": "standard", "acme": "bulk", "ops": "unlimited" }' }).rateLimitTiers)
      .toEqual({ fallback: "standard", tenants: new Map([["acme", "bulk"], ["ops", "unlimited"]]) })
  })

  it("a value that is not an object of tier names fails the runtime, naming the variable and the entry", () => {
    expect(() => read({ FACTLINE_RATE_LIMIT_TIERS: "bulk" })).toThrow(/FACTLINE_RATE_LIMIT_TIERS: must be a JSON object/)
    expect(() => read({ FACTLINE_RATE_LIMIT_TIERS: '["bulk"]' })).toThrow(/FACTLINE_RATE_LIMIT_TIERS: must be a JSON object/)
    expect(() => read({ FACTLINE_RATE_LIMIT_TIERS: '{ "acme": "Bulk Tier" }' })).toThrow(/FACTLINE_RATE_LIMIT_TIERS: "acme": the tier must be lower-case/)
    expect(() => read({ FACTLINE_RATE_LIMIT_TIERS: '{ "acme": 5000 }' })).toThrow(/"acme": the tier must be/)
  })
})
