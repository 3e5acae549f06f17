/**
 * Deterministic fact ids: the same cause always yields the same id.
 *
 * `tenant + cause + decider + position` for facts decided from a message (the
 * cause is its idempotency key), `tenant + parent fact id + processor + position`
 * for derived facts. Because the ledger refuses a second fact with an existing
 * id, "was this already done?" costs nothing: re-appending is a no-op.
 */

const encoder = new TextEncoder()

export const make = async (parts: {
  readonly tenantId: string
  readonly cause: string
  readonly decidedBy: string
  readonly position: number
}): Promise<string> => {
  const input = [parts.tenantId, parts.cause, parts.decidedBy, String(parts.position)].join("\u0000")
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(input)))
  let hex = ""
  for (let i = 0; i < 16; i++) hex += digest[i]!.toString(16).padStart(2, "0")
  return `f_${hex}`
}
