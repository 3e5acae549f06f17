/**
 * `GET /v1/projections/:name`: a projection's rows (a D1 read model) within the token's tenant, filtered
 * by its columns (`?column=value`), keyset-paged.
 */
import { Result, Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import type { Hono } from "hono"
import { Failure, Projection, ProjectionQuery, type Registry } from "@factline/core"
import { Issues } from "@factline/schemas"
import { type AppEnv, bind, cursor, describe, Json, limitParameter, nextCursor, problems } from "./Contract.js"
import { queryPage, type Run } from "./Run.js"

export const readProjection = HttpApiEndpoint.get("readProjection", "/v1/projections/:name", {
  params: { name: Schema.String.annotate({ description: "A registered projection's name" }) },
  query: Schema.StructWithRest(Schema.Struct({ cursor, limit: limitParameter(ProjectionQuery.pageLimit) }), [
    Schema.Record(Schema.String, Schema.String).annotate({ description: "`column=value` filters on the projection's columns (booleans as true/false)" })
  ]),
  success: Schema.Struct({ projection: Schema.String, data: Schema.Array(Json), next_cursor: nextCursor }),
  error: problems(400, 404, 503)
}).pipe(describe({
  summary: "Query a projection",
  scopes: ["read"],
  errors: { 400: "`invalid_query`: an unknown column, a bad value, cursor or limit (each named)", 404: "`not_found`: no projection of that name", 503: "`unavailable`: the projection store; retry" }
}))

export const group = HttpApiGroup.make("projections").add(readProjection)
  .annotateMerge(OpenApi.annotations({
    title: "Projections",
    description: "Read models in D1, filtered by their columns and keyset-paged."
  }))

export const mount = (app: Hono<AppEnv>, deps: { readonly registry: Registry.Shape; readonly run: Run }) => {
  const { registry, run } = deps

  bind(app, readProjection, async (c, reply) => {
    const projection = registry.projection(c.req.param("name")!)
    if (!projection) {
      throw new Failure.NotFound({ message: `no projection "${c.req.param("name")!}" (known: ${registry.projections.map((p) => p.name).join(", ")})` })
    }
    const page = ProjectionQuery.rows(projection, c.get("principal").tenantId, c.req.query())
    if (Result.isFailure(page)) throw new Failure.InvalidInput({ code: "invalid_query", message: Issues.render(page.failure), problems: page.failure })
    const rows = await queryPage(run, c, page.success)
    const booleans = Projection.booleanColumns(projection)
    return reply({
      projection: projection.name,
      data: rows.slice(0, page.success.limit).map((row) => {
        const out: Record<string, unknown> = { ...row }
        for (const b of booleans) if (out[b] !== null && out[b] !== undefined) out[b] = out[b] === 1
        return out
      }),
      next_cursor: page.success.nextCursor(rows)
    })
  })

}
