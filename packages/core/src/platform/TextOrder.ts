/**
 * Text in SQLite's BINARY collation order: by code point (the order of its UTF-8 bytes), which JavaScript's `<` on
 * UTF-16 units does not keep past the BMP. Wherever rows SQLite ordered are merged or compared in JavaScript — a
 * shard's hot and cold facts (ledger/ColdHistory.ts), a projection's parts (projections/FanOut.ts) — this is the order.
 */
export const compareText = (a: string, b: string): number => {
  if (a === b) return 0
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!
    const y = b.codePointAt(i)!
    if (x !== y) return x < y ? -1 : 1
    if (x > 0xffff) i++
  }
  return a.length - b.length
}
