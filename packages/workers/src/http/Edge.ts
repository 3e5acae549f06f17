/**
 * The edge middleware every served route passes through is declared with the description
 * (`@factline/core/api`'s Edge: `Edge`, `PublicEdge`, the `Caller` it provides), re-exported here; its
 * implementation is `Serve.edge`. Here: the Worker's bindings of a request (`WorkerEnv`) and the API a
 * group's handlers are built against (`apiOf`).
 */
import * as Context from "effect/Context"
import * as HttpApi from "effect/http-api/HttpApi"
import type * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import { Edge as Described } from "@factline/core/api"
import type { PlatformEnv } from "../Env.js"

export const { Caller, Edge, PublicEdge } = Described
export type Caller = Described.Caller
export type Edge = Described.Edge
export type PublicEdge = Described.PublicEdge

/**
 * The JSON body of the request being served, as the edge read it within the limits (JsonBody.ts): what a raw
 * handler reads (`POST /v1/events`, `POST /v1/batches`) instead of parsing the body again. Provided for an
 * endpoint with a JSON payload.
 */
export class RequestBody extends Context.Service<RequestBody, unknown>()("@factline/workers/http/RequestBody") {}

/** The Worker's bindings of the request being served (what the authentication and the rate limit read). */
export class WorkerEnv extends Context.Service<WorkerEnv, PlatformEnv>()("@factline/workers/http/WorkerEnv") {}

/**
 * The API a served group's handlers are built against (`HttpApiBuilder.group(Edge.apiOf(group), …)`): its
 * payloads are decoded strictly, every problem listed — a field the schema does not have is a 400 naming it,
 * as `Issues.decodeStrict` decodes a body on the Hono routes.
 */
export const apiOf = <const Group extends HttpApiGroup.Constraint>(group: Group) =>
  HttpApi.make("factline").add(group).annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "all" })
