/**
 * `GET /health`: liveness for load balancers and uptime probes (seed 003's `app.get("/health")`). Public —
 * a probe holds no token — so it says nothing of any tenant and reads no store: that this Worker runs and
 * routes, and factline's version. Whether the queues keep up is `GET /v1/queues/health` (scope `platform`).
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as OpenApi from "effect/http-api/OpenApi"
import { describe, problems } from "./Contract.js"
import { PublicEdge } from "./Edge.js"

/** factline's version (`@factline/workers`' package version; a unit test holds the two together). */
export const version = "0.1.0"

export const liveness = HttpApiEndpoint.get("liveness", "/health", {
  success: Schema.Struct({
    status: Schema.Literal("ok"),
    version: Schema.String.annotate({ description: "factline's version" })
  }),
  error: problems(400)
}).pipe(describe({
  summary: "Liveness",
  description: "For load balancers and uptime probes: no token, no store read, nothing of any tenant. `ok` means this Worker answers; queue health is `GET /v1/queues/health`.",
  errors: { 400: "`invalid_query`: a query parameter (this route takes none)" }
}))

export const group = HttpApiGroup.make("health").add(liveness).middleware(PublicEdge)
  .annotateMerge(OpenApi.annotations({ title: "Health", description: "Liveness of the deployment, without a token." }))
