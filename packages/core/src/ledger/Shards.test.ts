import { describe, expect, it } from "vitest"
import * as Shards from "./Shards.js"

describe("Shards", () => {
  it("hashes with 32-bit FNV-1a over UTF-8 (published test vectors), so placement never changes", () => {
    expect(Shards.hash("")).toBe(0x811c9dc5)
    expect(Shards.hash("a")).toBe(0xe40c292c)
    expect(Shards.hash("foobar")).toBe(0xbf9cf968)
    // Non-ASCII subjects hash their UTF-8 bytes, not UTF-16 units.
    expect(Shards.hash("é")).not.toBe(Shards.hash("\u00e9".normalize("NFD")))
  })

  it("places a stream on tenant/#(hash mod N), separate from the stream's identity", () => {
    const key = { tenant_id: "tenant-a", stream: "call_1" }
    expect(Shards.shardOf(key, 16)).toBe(`tenant-a/#${Shards.hash("call_1") % 16}`)
    expect(Shards.streamKey(key)).toBe("tenant-a/call_1")
  })

  it("spreads subjects evenly enough over the shards", () => {
    const counts = new Array(16).fill(0)
    for (let i = 0; i < 16_000; i++) counts[Shards.hash(`call_${i}`) % 16]++
    expect(Math.min(...counts)).toBeGreaterThan(800)
    expect(Math.max(...counts)).toBeLessThan(1200)
  })

  it("refuses an unusable shard count", () => {
    expect(() => Shards.checkShardCount(0)).toThrow(/from 1 to 1024/)
    expect(() => Shards.checkShardCount(2.5)).toThrow(/whole number/)
    expect(Shards.checkShardCount(16)).toBe(16)
  })
})
