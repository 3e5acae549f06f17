/**
 * `FACTLINE_TOKENS`: the one parser of the token table, shared by the HTTP edge (`Auth.ts`) and the
 * `factline tokens` CLI (imported as `@factline/workers/tokens`), so the CLI can never write a value the
 * edge would read as "nobody".
 *
 * A JSON array of `{ sha256, tenant_id, scopes, name?, created_at? }` — hashes only, never tokens. It
 * does not authenticate (Auth.ts does) and imports nothing of Cloudflare's, so Node can load it.
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { Contract, type Edge } from "@factline/core/api"
import { alertsTenantId, Issues, IsoDateTime, TenantId } from "@factline/schemas"

/** A token's scopes, as the API's description declares them (`@factline/core/api`). */
export const Scope = Contract.Scope
export type Scope = Contract.Scope

/** The scopes that act within the token's own tenant (every one but `platform`). */
export const tenantScopes: ReadonlyArray<Scope> = ["events:write", "read", "admin"]

export const TokenEntry = Schema.Struct({
  sha256: Schema.String.check(Schema.isPattern(/^[0-9a-f]{64}$/)),
  tenant_id: TenantId.check(Schema.makeFilter((id: string) => id !== alertsTenantId || `is reserved for the platform's alert endpoints; bind the token to another tenant`)),
  scopes: Schema.Array(Scope),
  name: Schema.optional(Schema.String),
  /** When the token was created (`factline tokens create` records it; informational). */
  created_at: Schema.optional(IsoDateTime)
})
export type TokenEntry = typeof TokenEntry.Type
export const TokenConfig = Schema.Array(TokenEntry)

/** Who holds a token (the description's `Edge.Principal`: what a handler reads as its `Caller`). */
export type Principal = Edge.Principal

const decodeConfig = Issues.decodeStrict(TokenConfig)

/**
 * A `FACTLINE_TOKENS` value → its hash → principal table, or why it is refused (every problem named by
 * path). Missing, not JSON or any invalid entry refuses the whole value: the edge fails closed.
 */
export const parse = (config: string | undefined): Result.Result<Map<string, Principal>, string> => {
  let json: unknown
  try {
    json = JSON.parse(config ?? "")
  } catch {
    return Result.fail("FACTLINE_TOKENS is missing or not JSON")
  }
  const decoded = decodeConfig(json)
  if (Result.isFailure(decoded)) return Result.fail(`FACTLINE_TOKENS is invalid (${Issues.render(decoded.failure)})`)
  return Result.succeed(new Map(decoded.success.map((t) => [t.sha256, { tenantId: t.tenant_id, scopes: t.scopes, name: t.name }])))
}
