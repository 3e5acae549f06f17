/**
 * The HTTP API, put together from its resource modules' descriptions (Contract.ts): the one value the
 * OpenAPI document is generated from, and the route table the auth, tenancy and hostile-input sweeps are
 * generated from. A test checks that the app serves exactly these routes.
 */
import * as HttpApi from "effect/http-api/HttpApi"
import * as OpenApi from "effect/http-api/OpenApi"
import * as Alerts from "./Alerts.js"
import type { Scope } from "./Auth.js"
import * as Batches from "./Batches.js"
import { scopesOf } from "./Contract.js"
import * as DeadLetters from "./DeadLetters.js"
import * as Documents from "./Documents.js"
import * as Events from "./Events.js"
import * as Facts from "./Facts.js"
import * as Health from "./Health.js"
import * as Projections from "./Projections.js"
import * as Queues from "./Queues.js"
import * as Recovery from "./Recovery.js"
import * as Runs from "./Runs.js"
import * as Tenants from "./Tenants.js"
import * as Webhooks from "./Webhooks.js"

/** Typed loosely on purpose: consumers read it through reflection and OpenAPI, and its full type names core internals. */
export const api: HttpApi.HttpApi<"factline", any> = HttpApi.make("factline")
  .add(Events.group)
  .add(Facts.group)
  .add(Projections.group)
  .add(Batches.group)
  .add(DeadLetters.group)
  .add(Runs.group)
  .add(Queues.group)
  .add(Recovery.group)
  .add(Tenants.group)
  .add(Webhooks.group)
  .add(Alerts.group)
  .add(Documents.group)
  .add(Health.group)
  .annotateMerge(OpenApi.annotations({
    title: "factline",
    version: "1",
    // The framework's licence (packages/workers/LICENSE), which the generated API is served under.
    license: { name: "MIT", identifier: "MIT" },
    // Relative: the document is served by the deployment it describes, so its origin is the API's.
    servers: [{ url: "/", description: "This deployment: the origin serving this document" }],
    description: "The HTTP API of a factline platform: ingest typed domain events, read the ledger's facts and the projections, run batch jobs, watch every message attempt (runs) and retry it, operate dead letters and queues, manage webhook endpoints, and send operators alerts. Every route but the public documents and `GET /health` (liveness) takes a bearer token; a token belongs to one tenant and sees only that tenant's data. Errors are one shape, `Problem`.",
    transform: (spec: Record<string, any>) => ({
      ...spec,
      components: {
        ...spec.components,
        securitySchemes: {
          ...spec.components?.securitySchemes,
          bearer: { type: "http", scheme: "bearer", description: "A platform token (`npm run factline -- tokens create`); its scopes (`events:write`, `read`, `admin`, `platform`) are listed per operation, any one of them suffices." }
        }
      }
    })
  }))

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

export interface Route {
  readonly method: Method
  /** Hono's pattern, `:name` for a path parameter. */
  readonly path: string
  /** A token needs one of these. */
  readonly scopes: readonly [Scope, ...Array<Scope>]
}

const all: Array<{ readonly method: Method; readonly path: string; readonly scopes: Route["scopes"] | undefined }> = []
HttpApi.reflect(api, {
  onGroup: () => {},
  onEndpoint: ({ endpoint }) => void all.push({ method: endpoint.method as Method, path: endpoint.path, scopes: scopesOf(endpoint) })
})

/** Every authenticated route of the API and the scopes that may call it. */
export const routes: ReadonlyArray<Route> = all.filter((r): r is Route => r.scopes !== undefined)

/** Routes without a token: the documents, the dashboard page and liveness (they hold no data; every call the page makes authenticates). */
export const publicRoutes: ReadonlyArray<{ readonly method: Method; readonly path: string }> = all.filter((r) => r.scopes === undefined).map(({ method, path }) => ({ method, path }))
