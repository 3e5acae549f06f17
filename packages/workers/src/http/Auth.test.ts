import { describe, expect, it } from "vitest"
import * as Auth from "./Auth.js"

const hash = "a".repeat(64)

describe("FACTLINE_TOKENS", () => {
  it("accepts an entry with the created_at that `factline tokens create` records", () => {
    const table = Auth.principals(JSON.stringify([{ name: "billing", sha256: hash, tenant_id: "acme", scopes: ["read"], created_at: "2026-11-22T10:00:00Z" }]))
    expect(table.get(hash)).toEqual({ tenantId: "acme", scopes: ["read"], name: "billing" })
  })

  it("still accepts entries without created_at (hand-written before it existed)", () => {
    expect(Auth.principals(JSON.stringify([{ sha256: hash, tenant_id: "acme", scopes: ["admin"] }])).get(hash)?.scopes).toEqual(["admin"])
  })

  it("refuses every token when a created_at is not an ISO date-time (fails closed)", () => {
    const table = Auth.principals(JSON.stringify([{ sha256: hash, tenant_id: "acme", scopes: ["read"], created_at: "yesterday" }]))
    expect(table.size).toBe(0)
  })
})
