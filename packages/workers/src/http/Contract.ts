/**
 * The HTTP API's description helpers, as the server reads them. The description itself — every route as an
 * Effect `HttpApiEndpoint`, `problems`, `Scopes`, `BodyUsage`, `describe` and the field schemas — lives in
 * `@factline/core/api` (api/Contract.ts), where @factline/client derives its client from it too; this module
 * re-exports what the serving (Serve.ts) reads, and holds the server's own limit on a URL.
 */
import { Contract } from "@factline/core/api"

export const { problems, Scopes, BodyUsage, describe, scopesOf, queryNames, queryRefusal, pageLimit, limitParameter, cursor, nextCursor, oneOf, text, required, wholeNumber, Json } = Contract
export type Endpoint = Contract.Endpoint
export type Description = Contract.Description
export type PageLimit = Contract.PageLimit

/**
 * The longest URL a route reads (8 KiB): longer is a JSON 414 `uri_too_long`, before authentication. Cloudflare's
 * edge itself refuses URLs over 16 KB with a plain-text 414 before the Worker runs (as `wrangler dev` does over
 * its own limit); no route needs more than a few hundred characters.
 */
export const maxUrlBytes = 8 * 1024
