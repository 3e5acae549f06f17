/**
 * Keyset cursors for paged reads of D1 tables: the last row's key values as a
 * base64url JSON array (opaque to callers; `next_cursor` in every listing).
 * `decode` checks the shape it expects and answers `undefined` for anything
 * else, so a forged or truncated cursor is a 400, never a query.
 */
export type Kind = "string" | "integer" | "value"

export const encode = (values: ReadonlyArray<string | number | boolean | null>): string =>
  btoa(JSON.stringify(values)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")

const fits = (kind: Kind, v: unknown) =>
  kind === "string" ? typeof v === "string" : kind === "integer" ? Number.isInteger(v) : typeof v === "string" || (typeof v === "number" && Number.isFinite(v))

/** The cursor's values if it has exactly these kinds (`value`: a string or a finite number), else undefined. */
export const decode = (cursor: string, kinds: ReadonlyArray<Kind>): Array<string | number> | undefined => {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined
  try {
    const values = JSON.parse(atob(cursor.replace(/-/g, "+").replace(/_/g, "/"))) as unknown
    return Array.isArray(values) && values.length === kinds.length && values.every((v, i) => fits(kinds[i]!, v)) ? values : undefined
  } catch {
    return undefined
  }
}
