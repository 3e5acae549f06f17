import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as SendBatches from "./SendBatches.js"

describe("SendBatches.split", () => {
  it("keeps every sendBatch within 100 messages and 256 KB, in order, losing nothing", () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 120_000 }), { maxLength: 400 }), (sizes) => {
      const bodies = sizes.map((n, i) => ({ i, pad: "x".repeat(n) }))
      const batches = SendBatches.split(bodies)
      expect(batches.flat()).toEqual(bodies)
      for (const batch of batches) {
        expect(batch.length).toBeLessThanOrEqual(100)
        const bytes = batch.reduce((n, b) => n + SendBatches.sizeOf(b), 0)
        expect(batch.length === 1 || bytes <= SendBatches.maxBatchBytes).toBe(true)
      }
    }), { numRuns: 50 })
  })

  it("250 small messages take three calls", () => {
    expect(SendBatches.split(Array.from({ length: 250 }, (_, i) => ({ i }))).map((b) => b.length)).toEqual([100, 100, 50])
  })
})

describe("SendBatches.utf8Bytes", () => {
  it("counts what TextEncoder writes, for any text (surrogate pairs and lone surrogates included)", () => {
    const encoder = new TextEncoder()
    fc.assert(fc.property(fc.string({ unit: "binary", maxLength: 300 }), fc.nat(70_000), (text, pad) => {
      // Past 131,072 units the count takes TextEncoder's own path: both are covered.
      const long = text + "é".repeat(pad % 3 === 0 ? pad : 0) + (pad % 5 === 0 ? "𝄞".repeat(70_000) : "")
      expect(SendBatches.utf8Bytes(long)).toBe(encoder.encode(long).byteLength)
    }), { numRuns: 200 })
  })
})
