/**
 * What every route served from the description (Serve.ts) passes through, declared as an Effect
 * `HttpApiMiddleware` that a resource's group takes with `.middleware(Edge)`: the bearer token with one of the
 * endpoint's `Scopes`, the tenant's rate limit, the URL length, the query's names and values, the JSON body's
 * limits — then the handler, whose failure (or a refused input) is answered by the one problem writer. It
 * provides the caller, `Caller`, to the handlers. The implementation is `Serve.edge`.
 */
import * as Context from "effect/Context"
import * as HttpApi from "effect/http-api/HttpApi"
import type * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiMiddleware from "effect/http-api/HttpApiMiddleware"
import * as HttpApiSecurity from "effect/http-api/HttpApiSecurity"
import type { PlatformEnv } from "../Env.js"
import type { Principal } from "./Auth.js"

/** The authenticated caller of a served route: its tenant, scopes and name. */
export class Caller extends Context.Service<Caller, Principal>()("@factline/workers/http/Caller") {}

/** The Worker's bindings of the request being served (what the authentication and the rate limit read). */
export class WorkerEnv extends Context.Service<WorkerEnv, PlatformEnv>()("@factline/workers/http/WorkerEnv") {}

export class Edge extends HttpApiMiddleware.Service<Edge, { provides: Caller }>()("@factline/workers/http/Edge", {
  security: { bearer: HttpApiSecurity.bearer }
}) {}

/**
 * What a public route served from the description passes through (`GET /health`): the URL length and the
 * query as `Edge` checks them, and the one problem writer — no token, no rate limit, no `Caller`. Its
 * implementation is `Serve.publicEdge`.
 */
export class PublicEdge extends HttpApiMiddleware.Service<PublicEdge>()("@factline/workers/http/PublicEdge") {}

/**
 * The API a served group's handlers are built against (`HttpApiBuilder.group(Edge.apiOf(group), …)`): its
 * payloads are decoded strictly, every problem listed — a field the schema does not have is a 400 naming it,
 * as `Issues.decodeStrict` decodes a body on the Hono routes.
 */
export const apiOf = <const Group extends HttpApiGroup.Constraint>(group: Group) =>
  HttpApi.make("factline").add(group).annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "all" })
