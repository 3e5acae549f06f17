/**
 * JSON with object keys sorted, so that two equal values serialize to the same
 * text. The ledger compares a re-appended fact with the stored one this way:
 * key order in a handler's output must not turn a duplicate into a conflict.
 */
export const stringify = (value: unknown): string => JSON.stringify(sort(value))

const sort = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(sort)
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key]
      if (v !== undefined) out[key] = sort(v)
    }
    return out
  }
  return value
}
