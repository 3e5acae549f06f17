/**
 * The HTTP API of a factline platform, put together from its resource modules' descriptions (Contract.ts):
 * the one value @factline/workers serves (`HttpApiBuilder`) and generates the OpenAPI document and the route
 * table from, and @factline/client derives its client from (`HttpApiClient`).
 */
import * as HttpApi from "effect/http-api/HttpApi"
import * as OpenApi from "effect/http-api/OpenApi"
import * as Alerts from "./Alerts.js"
import * as Batches from "./Batches.js"
import * as DeadLetters from "./DeadLetters.js"
import * as Documents from "./Documents.js"
import * as Events from "./Events.js"
import * as Facts from "./Facts.js"
import * as Health from "./Health.js"
import * as Projections from "./Projections.js"
import * as Queues from "./Queues.js"
import * as Recovery from "./Recovery.js"
import * as Runs from "./Runs.js"
import * as Subjects from "./Subjects.js"
import * as Tenants from "./Tenants.js"
import * as Webhooks from "./Webhooks.js"
import * as Workflows from "./Workflows.js"

/** The whole API: every group, typed, so that a client derived from it (`HttpApiClient.make(api)`) is typed by it. */
export const api = HttpApi.make("factline")
  .add(Events.group)
  .add(Facts.group)
  .add(Projections.group)
  .add(Batches.group)
  .add(DeadLetters.group)
  .add(Runs.group)
  .add(Workflows.group)
  .add(Queues.group)
  .add(Recovery.group)
  .add(Tenants.group)
  .add(Subjects.group)
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
