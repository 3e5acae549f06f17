/**
 * Bearer-token authentication: each token is bound to one tenant and a set of scopes.
 *
 * Only SHA-256 hashes of tokens are configured (`FACTLINE_TOKENS`), never the
 * tokens themselves, and a token is never logged or echoed back. No token or an
 * unknown one is 401; a token without the scope a route needs is 403. Every
 * response of an authenticated route, errors included, carries
 * `cache-control: no-store`: no shared or browser cache may keep tenant data.
 */
import * as Result from "effect/Result"
import type { PlatformEnv } from "../Env.js"
import { settingsOf } from "../Services.js"
import { Forbidden, Unauthorized } from "./Problem.js"
import * as TokenConfig from "./TokenConfig.js"

export { Scope, TokenConfig, TokenEntry } from "./TokenConfig.js"
export type { Principal } from "./TokenConfig.js"
type Scope = TokenConfig.Scope
type Principal = TokenConfig.Principal

const cache = new Map<string, Map<string, Principal>>()

/**
 * Parses (once per distinct config string) the hash → principal table, with the parser the `factline
 * tokens` CLI checks every value it writes with (`TokenConfig.parse`). A bad config fails closed.
 */
export const principals = (config: string | undefined): Map<string, Principal> => {
  const key = config ?? ""
  const cached = cache.get(key)
  if (cached) return cached
  const parsed = TokenConfig.parse(config)
  if (Result.isFailure(parsed)) console.error(`${parsed.failure}; every request will be refused`)
  const table = Result.getOrElse(parsed, () => new Map<string, Principal>())
  cache.set(key, table)
  return table
}

export const sha256Hex = async (text: string): Promise<string> => {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)))
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("")
}

/**
 * The principal of a request's `Authorization` header, whose token holds one of `scopes`: a 401 without a
 * bearer token or with an unknown one, a 403 without the scope (thrown, as members of the failure family).
 */
export const authenticate = async (env: PlatformEnv, authorization: string | undefined, scopes: ReadonlyArray<Scope>): Promise<Principal> => {
  const match = /^Bearer\s+(\S+)$/i.exec(authorization ?? "")
  if (!match) throw new Unauthorized({ message: "missing bearer token: send Authorization: Bearer <token>" })
  const principal = principals(settingsOf(env).tokens).get(await sha256Hex(match[1]!))
  if (!principal) throw new Unauthorized({ message: "invalid bearer token" })
  if (!scopes.some((scope) => principal.scopes.includes(scope))) {
    throw new Forbidden({ message: `this token lacks the ${scopes.map((s) => JSON.stringify(s)).join(" or ")} scope` })
  }
  return principal
}
