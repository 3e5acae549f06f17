/**
 * How a spec (Specs, ProjectionSpec) fails and compares: `SpecError` carries `actual` and `expected` for a test
 * runner's diff; values compare as JSON with sorted keys (stored data comes back from SQLite in another key order).
 */
import * as StableJson from "../ledger/StableJson.js"

/** A failed expectation, with `actual` and `expected` so test runners show a diff. */
export class SpecError extends Error {
  override readonly name = "SpecError"
  readonly showDiff: boolean
  constructor(message: string, readonly actual?: unknown, readonly expected?: unknown) {
    super(message)
    this.showDiff = actual !== undefined || expected !== undefined
  }
}

/** A JSON copy with object keys sorted: stored data comes back from SQLite with its keys in another order. */
export const json = <T>(value: T): T => JSON.parse(StableJson.stringify(JSON.parse(JSON.stringify(value)))) as T
export const same = (a: unknown, b: unknown) => StableJson.stringify(json(a)) === StableJson.stringify(json(b))

/** Whether an error message is the one expected (a substring or a pattern; anything when not given). */
export const matches = (error: string, match: string | RegExp | undefined) =>
  match === undefined || (typeof match === "string" ? error.includes(match) : match.test(error))
