/**
 * Bearer-token authentication: each token is bound to one tenant and a set of scopes.
 *
 * Only SHA-256 hashes of tokens are configured (`FACTLINE_TOKENS`), never the
 * tokens themselves, and a token is never logged or echoed back. No token or an
 * unknown one is 401; a token without the scope a route needs is 403. Every
 * response of an authenticated route, errors included, carries
 * `cache-control: no-store`: no shared or browser cache may keep tenant data.
 */
import { Result, Schema } from "effect"
import type { MiddlewareHandler } from "hono"
import { Issues } from "@factline/schemas"
import { IsoDateTime, TenantId } from "@factline/schemas"
import { Forbidden, Unauthorized } from "./Problem.js"

/**
 * `events:write`, `read` and `admin` act within the token's tenant; `platform`
 * is for operations across every tenant (a projection rebuild replays all
 * tenants' facts), for the platform's operators only — never give it to a tenant.
 */
export const Scope = Schema.Literals(["events:write", "read", "admin", "platform"])
export type Scope = typeof Scope.Type

export const TokenEntry = Schema.Struct({
  sha256: Schema.String.check(Schema.isPattern(/^[0-9a-f]{64}$/)),
  tenant_id: TenantId,
  scopes: Schema.Array(Scope),
  name: Schema.optional(Schema.String),
  /** When the token was created (`factline tokens create` records it; informational). */
  created_at: Schema.optional(IsoDateTime)
})
export const TokenConfig = Schema.Array(TokenEntry)

export interface Principal {
  readonly tenantId: string
  readonly scopes: ReadonlyArray<Scope>
  readonly name: string | undefined
}

const decodeConfig = Issues.decodeStrict(TokenConfig)
const cache = new Map<string, Map<string, Principal>>()

/** Parses (once per distinct config string) the hash → principal table. A bad config fails closed. */
export const principals = (config: string | undefined): Map<string, Principal> => {
  const key = config ?? ""
  const cached = cache.get(key)
  if (cached) return cached
  let table = new Map<string, Principal>()
  try {
    const decoded = decodeConfig(JSON.parse(key))
    if (Result.isSuccess(decoded)) {
      table = new Map(decoded.success.map((t) => [t.sha256, { tenantId: t.tenant_id, scopes: t.scopes, name: t.name }]))
    } else {
      console.error(`FACTLINE_TOKENS is invalid (${Issues.render(decoded.failure)}); every request will be refused`)
    }
  } catch {
    console.error("FACTLINE_TOKENS is missing or not JSON; every request will be refused")
  }
  cache.set(key, table)
  return table
}

export const sha256Hex = async (text: string): Promise<string> => {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)))
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("")
}

export type AuthVariables = { principal: Principal }

/** Authenticates every request; the token needs one of `scopes` (what the route accepts). */
export const requireScope = (...scopes: [Scope, ...Array<Scope>]): MiddlewareHandler<{ Bindings: { FACTLINE_TOKENS?: string }; Variables: AuthVariables }> =>
  async function authenticate(c, next) {
    c.header("cache-control", "no-store")
    const header = c.req.header("authorization") ?? ""
    const match = /^Bearer\s+(\S+)$/i.exec(header)
    if (!match) {
      throw new Unauthorized({ message: "missing bearer token: send Authorization: Bearer <token>" })
    }
    const principal = principals(c.env.FACTLINE_TOKENS).get(await sha256Hex(match[1]!))
    if (!principal) throw new Unauthorized({ message: "invalid bearer token" })
    if (!scopes.some((scope) => principal.scopes.includes(scope))) {
      throw new Forbidden({ message: `this token lacks the ${scopes.map((s) => JSON.stringify(s)).join(" or ")} scope` })
    }
    c.set("principal", principal)
    await next()
    // A handler may return a Response it built itself; the header must be on it too.
    if (!c.res.headers.has("cache-control")) c.res.headers.set("cache-control", "no-store")
  }
