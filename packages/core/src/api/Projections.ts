/**
 * `GET /v1/projections/:name`: a projection's rows (a D1 read model) within the token's tenant, filtered
 * by its columns (`?column=value`), keyset-paged. While the projection catches up from the ledger (new to
 * the deployment, or its mapping `version` raised: CatchUp), the page also says `status: "catching_up"`
 * with `catch_up: { progress, since }`, and the rows are what it has so far; once current, neither field is
 * there. A projection whose table is missing answers 503 `projection_not_migrated`, naming the table.
 *
 * `GET /v1/projections` (scope `platform`): every registered projection's catch-up state, and
 * `POST /v1/projections/catch-up` (scope `platform`): the scheduled run's check, now (after a deploy).
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as OpenApi from "effect/http-api/OpenApi"
import { cursor, describe, Json, limitParameter, nextCursor, type PageLimit, problems } from "./Contract.js"
import { Edge } from "./Edge.js"
/** A page of a projection (or of the facts copy): its bounds (core's `ProjectionQuery.pageLimit`; a test holds the two together). */
export const pageLimit: PageLimit = { maximum: 500, default: 50 }

export const readProjection = HttpApiEndpoint.get("readProjection", "/v1/projections/:name", {
  params: { name: Schema.String.annotate({ description: "A registered projection's name" }) },
  query: Schema.StructWithRest(Schema.Struct({ cursor, limit: limitParameter(pageLimit) }), [
    Schema.Record(Schema.String, Schema.String).annotate({ description: "`column=value` filters on the projection's columns (booleans as true/false)" })
  ]),
  success: Schema.Struct({
    projection: Schema.String,
    data: Schema.Array(Json),
    next_cursor: nextCursor,
    status: Schema.optional(Schema.Literal("catching_up")).annotate({ description: "Present while the projection replays the ledger (new to the deployment, or its mapping version raised): the rows are not complete yet" }),
    catch_up: Schema.optional(Schema.Struct({
      progress: Schema.Number.annotate({ description: "Share of the ledger's shards replayed, 0 to 1" }),
      since: Schema.NullOr(Schema.String).annotate({ description: "When the replay started (null until it has)" })
    }))
  }),
  error: problems(400, 404, 503)
}).pipe(describe({
  summary: "Query a projection",
  description: "While the projection catches up from the ledger, the page carries `status: \"catching_up\"` and `catch_up`; once it is current, neither.",
  scopes: ["read"],
  errors: {
    400: "`invalid_query`: an unknown column, a bad value, cursor or limit (each named)",
    404: "`not_found`: no projection of that name",
    503: "`projection_not_migrated`: the projection's table does not exist (its migration was never applied; the message names the table); `unavailable`: the projection store, retry"
  }
}))

const Rebuilding = Schema.Struct({
  batch_id: Schema.String,
  status: Schema.Literals(["running", "completed", "failed"]),
  shards_done: Schema.Int,
  shards_total: Schema.Int,
  facts_replayed: Schema.Int,
  facts_failed: Schema.Int,
  started_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
})

const ProjectionState = Schema.Struct({
  projection: Schema.String,
  version: Schema.Int.annotate({ description: "The mapping version the running code declares" }),
  status: Schema.Literals(["current", "catching_up", "not_migrated", "unchecked"]).annotate({ description: "`unchecked`: no scheduled run has compared it yet" }),
  recorded_version: Schema.NullOr(Schema.Int).annotate({ description: "The version the deployment has recorded" }),
  detail: Schema.NullOr(Schema.String),
  rebuild: Schema.NullOr(Rebuilding).annotate({ description: "The replay the system started to bring it up to date (a batch job `cu_…`)" }),
  updated_at: Schema.NullOr(Schema.String)
}).annotate({ identifier: "ProjectionState", description: "A registered projection and its catch-up" })

export const listProjections = HttpApiEndpoint.get("listProjections", "/v1/projections", {
  success: Schema.Struct({ data: Schema.Array(ProjectionState) }),
  error: problems(503)
}).pipe(describe({ summary: "Projections and their catch-up", scopes: ["platform"], errors: { 503: "`unavailable`: the platform database; retry" } }))

export const catchUpProjections = HttpApiEndpoint.post("catchUpProjections", "/v1/projections/catch-up", {
  success: Schema.Struct({
    steps: Schema.Array(Schema.Struct({ projection: Schema.String, action: Schema.String, batch_id: Schema.optional(Schema.String), detail: Schema.optional(Schema.String) })),
    data: Schema.Array(ProjectionState)
  }),
  error: problems(503)
}).pipe(describe({
  summary: "Check the projections now",
  description: "What every scheduled run does: starts the catch-up of projections new to the deployment or whose version changed, records those caught up, reports those whose table is missing.",
  scopes: ["platform"],
  errors: { 503: "`unavailable`: the platform database; retry" }
}))

export const group = HttpApiGroup.make("projections").add(readProjection, listProjections, catchUpProjections).middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Projections",
    description: "Read models in D1, filtered by their columns and keyset-paged."
  }))
