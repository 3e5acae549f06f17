/**
 * The route table of the HTTP API: every authenticated route with the scopes that may call it. Each route
 * module (Api, Batches, Webhooks, Operations) takes its authentication from here with `authenticate`, and a
 * test checks the table equals the routes the app registers, then sweeps auth and tenancy from it.
 */
import { requireScope, type Scope } from "./Auth.js"

export interface Route {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
  /** Hono's pattern, `:name` for a path parameter. */
  readonly path: string
  /** A token needs one of these. */
  readonly scopes: readonly [Scope, ...Array<Scope>]
}

/**
 * Every route of the API and the scopes that may call it: the routes below take
 * their scopes from here, and a test checks this table equals the routes the app
 * registers, then generates the auth and tenancy sweep from it — a new route
 * cannot be added without being swept.
 */
export const routes = [
  { method: "POST", path: "/v1/events", scopes: ["events:write"] },
  { method: "GET", path: "/v1/streams/:subject/facts", scopes: ["read"] },
  { method: "GET", path: "/v1/facts", scopes: ["read"] },
  { method: "GET", path: "/v1/facts/:fact_id/trace", scopes: ["read"] },
  { method: "GET", path: "/v1/projections/:name", scopes: ["read"] },
  // Batch jobs: import, export and reconcile work on the caller's tenant (`admin`); a rebuild replays
  // every tenant's facts, so it takes the `platform` scope (checked per operation in the route).
  { method: "POST", path: "/v1/batches", scopes: ["admin", "platform"] },
  { method: "GET", path: "/v1/batches/:id", scopes: ["admin", "platform"] },
  { method: "GET", path: "/v1/batches", scopes: ["admin", "platform"] },
  { method: "POST", path: "/v1/batches/:id/cancel", scopes: ["admin", "platform"] },
  { method: "GET", path: "/v1/batches/:id/output", scopes: ["admin", "platform"] },
  // An import's NDJSON file, streamed to R2 under the caller's tenant (then `{ "operation": "import", "manifest": "<name>" }`).
  { method: "PUT", path: "/v1/batches/uploads/:name", scopes: ["admin"] },
  // Webhooks (Webhooks.ts): the catalog for any reader; endpoints are a tenant admin's.
  { method: "GET", path: "/v1/webhooks/event-types", scopes: ["read", "admin"] },
  { method: "POST", path: "/v1/webhooks/endpoints", scopes: ["admin"] },
  { method: "GET", path: "/v1/webhooks/endpoints", scopes: ["admin"] },
  { method: "GET", path: "/v1/webhooks/endpoints/:id", scopes: ["admin"] },
  { method: "PATCH", path: "/v1/webhooks/endpoints/:id", scopes: ["admin"] },
  { method: "POST", path: "/v1/webhooks/endpoints/:id/rotate-secret", scopes: ["admin"] },
  { method: "GET", path: "/v1/webhooks/endpoints/:id/attempts", scopes: ["admin"] },
  { method: "POST", path: "/v1/webhooks/endpoints/:id/recover", scopes: ["admin"] },
  { method: "DELETE", path: "/v1/webhooks/endpoints/:id", scopes: ["admin"] },
  // Operations (Operations.ts): a tenant's own dead letters, or every tenant's with the platform scope; health is platform-wide.
  { method: "GET", path: "/v1/dlq", scopes: ["admin", "platform"] },
  { method: "POST", path: "/v1/dlq/replay", scopes: ["admin", "platform"] },
  { method: "GET", path: "/v1/dlq/:id", scopes: ["admin", "platform"] },
  { method: "POST", path: "/v1/dlq/:id/replay", scopes: ["admin", "platform"] },
  { method: "POST", path: "/v1/dlq/:id/skip", scopes: ["admin", "platform"] },
  { method: "POST", path: "/v1/dlq/:id/escalate", scopes: ["admin", "platform"] },
  { method: "GET", path: "/v1/queues/health", scopes: ["platform"] }
] as const satisfies ReadonlyArray<Route>

/** Routes without a token: the dashboard page (it holds no data; every call it makes authenticates). */
export const publicRoutes = [{ method: "GET", path: "/dashboard" }, { method: "GET", path: "/asyncapi.json" }] as const

export type RouteKey = `${(typeof routes)[number]["method"]} ${(typeof routes)[number]["path"]}`

/** The authentication middleware of a route of the table. */
export const authenticate = (key: RouteKey) => {
  const route: Route = routes.find((r) => `${r.method} ${r.path}` === key)!
  return requireScope(...route.scopes)
}

