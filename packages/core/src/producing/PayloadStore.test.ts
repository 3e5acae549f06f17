import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as PayloadStore from "./PayloadStore.js"

const tenantId = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,15}$/)
const name = fc.stringMatching(/^[A-Za-z0-9_/.-]{1,20}$/)

describe("PayloadStore.keyOf: which references a tenant's message may load", () => {
  it("its own payloads, under _payloads/<tenant>/ or the layout before it; never another tenant's (property)", () => {
    fc.assert(fc.property(tenantId, tenantId, name, (a, b, n) => {
      const own = PayloadStore.payloadKey(a, n)
      expect(own.startsWith(PayloadStore.payloadsPrefix)).toBe(true)
      expect(PayloadStore.keyOf("bucket", a, `r2://bucket/${own}`)).toBe(own)
      if (a !== b) {
        expect(PayloadStore.keyOf("bucket", b, `r2://bucket/${own}`)).toBeUndefined()
        expect(PayloadStore.keyOf("bucket", b, `r2://bucket/${a}/${n}`)).toBeUndefined()
      }
    }), { numRuns: 300 })
  })

  it("refuses another bucket, a tenant whose id extends the caller's, and the tenant's uploads, batch files and archive", () => {
    expect(PayloadStore.keyOf("bucket", "tenant-a", "r2://bucket/tenant-a/p_1")).toBe("tenant-a/p_1")
    expect(PayloadStore.keyOf("bucket", "tenant-a", "r2://bucket/tenant-a/facts/f_1")).toBe("tenant-a/facts/f_1")
    expect(PayloadStore.keyOf("bucket", "tenant-a", "r2://other/_payloads/tenant-a/p_1")).toBeUndefined()
    expect(PayloadStore.keyOf("bucket", "tenant-a", "r2://bucket/_payloads/tenant-a.x/p_1")).toBeUndefined()
    expect(PayloadStore.keyOf("bucket", "tenant-a", "r2://bucket/tenant-a.x/p_1")).toBeUndefined()
    for (const folder of ["uploads/p.json", "batches/b_1/input.ndjson", "archive/facts/2026-01-01/part-0000.parquet"]) {
      expect(PayloadStore.keyOf("bucket", "tenant-a", `r2://bucket/tenant-a/${folder}`)).toBeUndefined()
    }
  })
})
