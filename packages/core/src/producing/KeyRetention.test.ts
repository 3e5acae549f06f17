import { describe, expect, it } from "vitest"
import * as KeyRetention from "./KeyRetention.js"

const retention = (raw: string | undefined) => {
  const parsed = KeyRetention.parse(raw)
  if (typeof parsed === "string") throw new Error(parsed)
  return parsed
}

describe("FACTLINE_KEY_RETENTION_DAYS", () => {
  it("defaults to 30 days for every tenant; a number sets every tenant's", () => {
    expect(retention(undefined).days("tenant-a")).toBe(30)
    expect(retention(" ").days("tenant-a")).toBe(30)
    expect(retention("7").days("tenant-a")).toBe(7)
  })

  it("JSON per tenant, with \"*\" for the rest; the named tenants get their own cutoff", () => {
    const r = retention(`{ "*": 20, "big": 7 }`)
    expect([r.days("big"), r.days("small")]).toEqual([7, 20])
    expect(retention(`{ "big": 7 }`).days("small")).toBe(30)
    const now = Date.parse("2026-11-28T00:00:00.000Z")
    expect(KeyRetention.cutoffs(r, now)).toEqual({ before: "2026-11-08T00:00:00.000Z", tenants: { big: "2026-11-21T00:00:00.000Z" } })
  })

  it("refuses what is not whole days from 1, naming the tenant", () => {
    expect(KeyRetention.parse("0")).toContain("whole days from 1")
    expect(KeyRetention.parse("-3")).toContain("whole days from 1")
    expect(KeyRetention.parse("seven")).toContain("JSON object")
    expect(KeyRetention.parse(`{ "big": 0.5 }`)).toContain(`"big"`)
    expect(KeyRetention.parse(`{ "big": null }`)).toContain(`"big"`)
    expect(KeyRetention.parse("[7]")).toContain("JSON object")
  })
})
