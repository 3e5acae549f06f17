import { describe, expect, it } from "vitest"
import * as Parts from "./Parts.js"

describe("Parts", () => {
  it("a row's part is pinned: FNV-1a of its key as text, the same for a key bound as a number or read back as text", () => {
    // Pinned values: a change here would move stored rows away from the part their readers look in.
    expect(Parts.hash(["call_1"])).toBe(Parts.hash(["call_1"]))
    expect([Parts.partOf(["call_1"], 2), Parts.partOf(["call_2"], 2), Parts.partOf(["buyer_7"], 4), Parts.partOf([42], 16)])
      .toEqual([Parts.hash(["call_1"]) % 2, Parts.hash(["call_2"]) % 2, Parts.hash(["buyer_7"]) % 4, Parts.hash(["42"]) % 16])
    // FNV-1a 32 of the text ["call_1"], computed apart (Python) from this code.
    expect(Parts.hash(["call_1"])).toBe(388477813)
    expect(Parts.partOf([42], 8)).toBe(Parts.partOf(["42"], 8))
    expect(Parts.partOf([true], 4)).toBe(Parts.partOf([1], 4))
    expect(Parts.partOf(["a", null], 4)).toBe(Parts.partOf(["a", undefined], 4))
  })

  it("parts spread keys over every part, and a share lists the parts a database holds", () => {
    const counts = [0, 0, 0, 0]
    for (let i = 0; i < 4_000; i++) counts[Parts.partOf([`call_${i}`], 4)]!++
    for (const n of counts) expect(n).toBeGreaterThan(800)
    expect([...Parts.shares([1, 2, 1, 2])]).toEqual([[1, { of: 4, here: [0, 2] }], [2, { of: 4, here: [1, 3] }]])
  })
})
