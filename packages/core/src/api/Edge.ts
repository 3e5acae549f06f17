/**
 * What every route of the description passes through, declared as Effect `HttpApiMiddleware`s that a
 * resource's group takes with `.middleware(Edge)` (or `PublicEdge`): the bearer token with one of the
 * endpoint's `Scopes`, the tenant's rate limit, the URL length, the query's names and values, the JSON body's
 * limits — then the handler, whose failure (or a refused input) is answered by the one problem writer. `Edge`
 * provides the caller, `Caller`, to the handlers.
 *
 * Only the declarations: the server's implementation is @factline/workers' `Serve.edge`; the derived client
 * (@factline/client) sends the bearer token on every request itself.
 */
import * as Context from "effect/Context"
import * as HttpApiMiddleware from "effect/http-api/HttpApiMiddleware"
import * as HttpApiSecurity from "effect/http-api/HttpApiSecurity"
import type { Scope } from "./Contract.js"

/** Who holds a token: its tenant, its scopes and its name (`FACTLINE_TOKENS`). */
export interface Principal {
  readonly tenantId: string
  readonly scopes: ReadonlyArray<Scope>
  readonly name: string | undefined
}

/** The authenticated caller of a served route: its tenant, scopes and name. */
export class Caller extends Context.Service<Caller, Principal>()("@factline/core/api/Caller") {}

export class Edge extends HttpApiMiddleware.Service<Edge, { provides: Caller }>()("@factline/core/api/Edge", {
  security: { bearer: HttpApiSecurity.bearer }
}) {}

/**
 * What a public route passes through (`GET /health`, the documents): the URL length and the query as `Edge`
 * checks them, and the one problem writer — no token, no rate limit, no `Caller`.
 */
export class PublicEdge extends HttpApiMiddleware.Service<PublicEdge>()("@factline/core/api/PublicEdge") {}
