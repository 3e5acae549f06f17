/**
 * Deterministic fact ids: the same cause always yields the same id.
 *
 * `tenant + cause + decider + position` for facts decided from a message (the
 * cause is its idempotency key), `tenant + parent fact id + processor + position`
 * for derived facts. Because the ledger refuses a second fact with an existing
 * id, "was this already done?" costs nothing: re-appending is a no-op.
 */

const encoder = new TextEncoder()

/** The first 16 bytes of the SHA-256 of `parts` joined by NUL, as 32 hex digits: the deterministic ids' digest. */
export const digest = async (parts: ReadonlyArray<string>): Promise<string> => {
  const bytes = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(parts.join("\u0000"))))
  let hex = ""
  for (let i = 0; i < 16; i++) hex += bytes[i]!.toString(16).padStart(2, "0")
  return hex
}

export const make = async (parts: {
  readonly tenantId: string
  readonly cause: string
  readonly decidedBy: string
  readonly position: number
}): Promise<string> => `f_${await digest([parts.tenantId, parts.cause, parts.decidedBy, String(parts.position)])}`
