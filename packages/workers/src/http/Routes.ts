/**
 * The route table of the HTTP API, read from its description (`api` of `@factline/core/api`, re-exported
 * here): every route with the scopes that may call it, which the auth, tenancy and hostile-input sweeps are
 * generated from. A test checks that the Worker serves exactly these routes.
 */
import * as HttpApi from "effect/http-api/HttpApi"
import { api, Contract } from "@factline/core/api"

export { api }

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

export interface Route {
  readonly method: Method
  /** Hono's pattern, `:name` for a path parameter. */
  readonly path: string
  /** A token needs one of these. */
  readonly scopes: readonly [Contract.Scope, ...Array<Contract.Scope>]
}

const all: Array<{ readonly method: Method; readonly path: string; readonly scopes: Route["scopes"] | undefined }> = []
HttpApi.reflect(api, {
  onGroup: () => {},
  onEndpoint: ({ endpoint }) => void all.push({ method: endpoint.method as Method, path: endpoint.path, scopes: Contract.scopesOf(endpoint) })
})

/** Every authenticated route of the API and the scopes that may call it. */
export const routes: ReadonlyArray<Route> = all.filter((r): r is Route => r.scopes !== undefined)

/** Routes without a token: the documents, the dashboard page and liveness (they hold no data; every call the page makes authenticates). */
export const publicRoutes: ReadonlyArray<{ readonly method: Method; readonly path: string }> = all.filter((r) => r.scopes === undefined).map(({ method, path }) => ({ method, path }))
