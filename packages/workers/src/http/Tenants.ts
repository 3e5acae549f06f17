/**
 * Where a tenant's read side lives (core's Placement): `GET /v1/tenants/me` tells a tenant's analysts which
 * read database holds their rows (to query it with `wrangler d1 execute` or Drizzle); the platform scope lists
 * every placement with each database's tenant count (`GET /v1/tenants`) and places a tenant that has not been
 * used yet on a chosen database (`PUT /v1/tenants/:tenant/placement`) — a large customer on its own database.
 */
import { Effect, Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import type { Hono } from "hono"
import { Failure, Placement, Sql } from "@factline/core"
import { type AppEnv, bind, describe, problems } from "./Contract.js"
import { isObject, readBody } from "./JsonBody.js"
import type { Run } from "./Run.js"

const PlacementView = Schema.Struct({
  tenant_id: Schema.String,
  read_database: Schema.Int.annotate({ description: "Index of the tenant's read database" }),
  binding: Schema.String.annotate({ description: "Its binding: `FACTLINE_READ_DB_<n>`, or `DB` for read database 0 when it is the platform database" }),
  placed_at: Schema.String,
  writes_held_since: Schema.NullOr(Schema.String).annotate({ description: "Set while a move takes the tenant's last copy" })
})

export const me = HttpApiEndpoint.get("tenantPlacement", "/v1/tenants/me", {
  success: PlacementView,
  error: problems(503)
}).pipe(describe({
  summary: "Where my data lives",
  description: "The read database holding the caller's tenant: its projections, facts copy, dead letters, webhook state and batch jobs. Query it with `wrangler d1 execute <database> --command …` or Drizzle. A tenant is placed on first use.",
  scopes: ["read"],
  errors: { 503: "`unavailable`: the placement map; retry" }
}))

export const list = HttpApiEndpoint.get("listPlacements", "/v1/tenants", {
  success: Schema.Struct({
    databases: Schema.Array(Schema.Struct({ read_database: Schema.Int, binding: Schema.String, tenants: Schema.Int })),
    data: Schema.Array(PlacementView)
  }),
  error: problems(503)
}).pipe(describe({
  summary: "Every placement",
  description: "Each read database with how many tenants it holds, and every tenant's placement (at most 1,000, by tenant id).",
  scopes: ["platform"],
  errors: { 503: "`unavailable`: the placement map; retry" }
}))

export const place = HttpApiEndpoint.put("placeTenant", "/v1/tenants/:tenant/placement", {
  params: { tenant: Schema.String.annotate({ description: "A tenant id" }) },
  payload: Schema.Struct({ read_database: Schema.Int }),
  success: PlacementView,
  error: problems(400, 409, 503)
}).pipe(describe({
  summary: "Place a tenant",
  description: "Places a tenant not used yet on the given read database. A placed tenant keeps its database: placing it elsewhere is a 409 (move it instead); placing it where it is answers its placement.",
  scopes: ["platform"],
  errors: { 400: "`invalid_request`: no such read database", 409: "`conflict`: the tenant is already placed on another database", 503: "`unavailable`: the placement map; retry" }
}))

export const group = HttpApiGroup.make("tenants").add(me).add(list).add(place)
  .annotateMerge(OpenApi.annotations({ title: "Tenants", description: "Which read database holds each tenant's read side." }))

const view = (shape: Placement.Shape, placement: Placement.Placement) => ({
  tenant_id: placement.tenantId,
  read_database: placement.database,
  binding: bindingOf(shape, placement.database),
  placed_at: placement.placedAt,
  writes_held_since: placement.frozenSince
})

/** Read database 0 is the platform's own `DB` when no `FACTLINE_READ_DB_0` is bound. */
const bindingOf = (shape: Placement.Shape, index: number) =>
  shape.databases[index]?.identity === shape.platform.identity ? "DB" : `FACTLINE_READ_DB_${index}`

export const mount = (app: Hono<AppEnv>, { run }: { readonly run: Run }) => {
  bind(app, me, async (c, reply) => {
    const tenantId = c.get("principal").tenantId
    return reply(await run(c.env, Effect.gen(function*() {
      return view(yield* Placement.TenantPlacement, yield* Placement.of(tenantId))
    })))
  })

  bind(app, list, async (_c, reply) => {
    return reply(await run(_c.env, Effect.gen(function*() {
      const shape = yield* Placement.TenantPlacement
      const platform = yield* Sql.PlatformDatabase
      const counts = yield* shape.counts()
      const rows = yield* platform.all<Placement.Placement>(Sql.statement(
        "SELECT tenant_id AS tenantId, database, placed_at AS placedAt, frozen_since AS frozenSince FROM tenant_placements ORDER BY tenant_id LIMIT 1000"
      ))
      return {
        databases: counts.map((tenants, i) => ({ read_database: i, binding: bindingOf(shape, i), tenants })),
        data: rows.map((row) => view(shape, row))
      }
    })))
  })

  bind(app, place, async (c, reply) => {
    const body = await readBody(c)
    const index = isObject(body) ? body.read_database : undefined
    if (typeof index !== "number" || !Number.isInteger(index)) {
      throw new Failure.InvalidInput({ message: 'send { "read_database": <index> }', problems: [{ path: "read_database", message: "must be a whole number" }] })
    }
    const tenantId = c.req.param("tenant")!
    return reply(await run(c.env, Effect.gen(function*() {
      const shape = yield* Placement.TenantPlacement
      return view(shape, yield* shape.place(tenantId, index))
    })))
  })
}
