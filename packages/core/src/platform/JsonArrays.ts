/**
 * Bounding the one JSON parameter a statement reads with `json_each`: D1 and a Durable Object's SQLite both hold no
 * string over 2 MB, a bound value included, so a caller writing many rows through one parameter splits them here.
 * Plain data, no binding: the D1 projections and the ledger shards share it.
 */

/** JSON texts (each a row or value, already stringified) as JSON arrays of at most `maxItems` texts and about `maxChars` characters each, in order (a longer text alone). */
export const jsonArrays = (texts: ReadonlyArray<string>, maxChars: number, maxItems = Infinity): Array<string> => {
  const out: Array<string> = []
  let current: Array<string> = []
  let chars = 0
  for (const text of texts) {
    if (current.length > 0 && (current.length >= maxItems || chars + text.length > maxChars)) {
      out.push(`[${current.join(",")}]`)
      current = []
      chars = 0
    }
    current.push(text)
    chars += text.length + 1
  }
  if (current.length > 0) out.push(`[${current.join(",")}]`)
  return out
}
