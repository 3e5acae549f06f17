import { describe, expect, it } from "vitest"
import { matcher, streamHolds } from "./ErasureExports.js"

/** A stream of `text` cut into chunks of `size` bytes (a chunk boundary falls inside the subject's pattern). */
const chunked = (text: string, size: number) => {
  const bytes = new TextEncoder().encode(text)
  let at = 0
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.length) return controller.close()
      controller.enqueue(bytes.slice(at, at + size))
      at += size
    }
  })
}

describe("an erasure's search of export files for a data subject", () => {
  const ndjson = matcher("ndjson", ["buyer_id"], "buyer_7")
  const csv = matcher("csv", ["buyer_id"], "buyer_7")

  it("NDJSON: the subject as the JSON string value of a subject field, not a longer id nor another field", () => {
    expect(ndjson.test('{"call_id":"c1","buyer_id":"buyer_7","phone":"+44"}\n')).toBe(true)
    expect(ndjson.test('{"data":{"buyer_id":"buyer_7"}}\n')).toBe(true)
    expect(ndjson.test('{"buyer_id":"buyer_70"}\n')).toBe(false)
    expect(ndjson.test('{"note":"buyer_7","buyer_id":"buyer_8"}\n')).toBe(false)
  })

  it("CSV: the subject as a whole cell, quoted as the export quotes it", async () => {
    expect(csv.test("call_id,buyer_id\nc1,buyer_7\n")).toBe(true)
    expect(csv.test("buyer_id,call_id\nbuyer_7,c1\n")).toBe(true)
    expect(csv.test("call_id,buyer_id\nc1,buyer_70\nc2,xbuyer_7\n")).toBe(false)
    expect(matcher("csv", [], 'a,"b').test('x,"a,""b"\n')).toBe(true)
    // The file's first and last cells, read as a stream.
    expect(await streamHolds(chunked("buyer_7,c1", 3), csv)).toBe(true)
    expect(await streamHolds(chunked("c1,buyer_7", 3), csv)).toBe(true)
    // A cell that only starts with the subject, cut at a chunk boundary right after it, is not the subject.
    for (const size of [1, 2, 3, 4, 5, 9, 10]) expect(await streamHolds(chunked("c1,buyer_70\nc2,xbuyer_7,z\n", size), csv), `chunks of ${size}`).toBe(false)
  })

  it("a match across a chunk boundary is found; a file without the subject is read to its end", async () => {
    const lines = Array.from({ length: 200 }, (_, i) => `{"buyer_id":"buyer_${i + 100}","call_id":"c${i}"}\n`).join("")
    const text = `${lines}{"buyer_id":"buyer_7"}\n${lines}`
    for (const size of [1, 7, 13, 64, 4096]) {
      expect(await streamHolds(chunked(text, size), ndjson), `chunks of ${size}`).toBe(true)
      expect(await streamHolds(chunked(lines, size), ndjson)).toBe(false)
    }
    const rows = `call_id,buyer_id\n${Array.from({ length: 50 }, (_, i) => `c${i},buyer_${i + 100}`).join("\n")}\nc9,buyer_7\n`
    for (const size of [1, 5, 11]) expect(await streamHolds(chunked(rows, size), csv), `csv chunks of ${size}`).toBe(true)
  })
})
