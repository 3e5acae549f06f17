import fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { Fact } from "@factline/schemas"
import * as SendBatches from "../platform/SendBatches.js"
import * as FactMessage from "./FactMessage.js"

const fact = (i: number, tenant: string, text: string, pad: number): Fact => ({
  fact_id: `f_${i.toString(16).padStart(32, "0")}`, tenant_id: tenant, stream: `s${i % 7}`, sequence: i + 1, type: "call.recorded",
  data: { note: text, pad: "x".repeat(pad) }, schema_version: 1, causation_id: `c${i}`, correlation_id: `r${i}`, caused_by: "calls",
  created_at: "2026-11-24T00:00:00.000Z"
})

describe("FactMessage.pack", () => {
  it("gives each message its exact size as SendBatches.sizeOf counts it, and packs every fact once, by tenant, in order", async () => {
    await fc.assert(fc.asyncProperty(
      fc.array(fc.record({ tenant: fc.constantFrom("tenant-a", "tenant-b"), text: fc.string({ unit: "binary", maxLength: 40 }), pad: fc.nat(30_000) }), { minLength: 1, maxLength: 30 }),
      fc.boolean(),
      async (specs, replayed) => {
        const facts = specs.map((s, i) => fact(i, s.tenant, s.text, s.pad))
        const offloaded: Array<string> = []
        const packed = await FactMessage.pack(facts, async (_tenant, name) => (offloaded.push(name), `ref/${name}`), replayed ? { replayed } : {})
        for (const m of packed) {
          expect(m.bytes).toBe(SendBatches.sizeOf(m.body))
          expect(m.bytes).toBeLessThanOrEqual(FactMessage.maxMessageBytes + SendBatches.perMessageOverheadBytes)
        }
        for (const tenant of ["tenant-a", "tenant-b"]) {
          expect(packed.flatMap((m) => m.facts).filter((f) => f.tenant_id === tenant)).toEqual(facts.filter((f) => f.tenant_id === tenant))
        }
        expect(offloaded).toEqual([])
      }
    ), { numRuns: 60 })
  })

  it("measures each fact once with the caller's memo", async () => {
    const facts = Array.from({ length: 5 }, (_, i) => fact(i, "tenant-a", "é", 10))
    let calls = 0
    const bytesOf = (f: Fact) => (calls++, FactMessage.factBytes(f))
    const packed = await FactMessage.pack(facts, async () => "unused", {}, bytesOf)
    expect(packed).toHaveLength(1)
    expect(packed[0]!.bytes).toBe(SendBatches.sizeOf(packed[0]!.body))
    expect(calls).toBe(5) // one per fact
  })
})
