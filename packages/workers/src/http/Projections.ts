/**
 * The handlers of the Projections routes, implemented against their description (`@factline/core/api`'s `Projections`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { Failure, Projection, Registry } from "@factline/core"
import { CatchUp, ProjectionFanOut, ProjectionQuery, ProjectionStore } from "@factline/core/runtime"
import { Issues } from "@factline/schemas"
import { apiOf, Caller } from "./Edge.js"
import { Projections as Description } from "@factline/core/api"

/**
 * A page of the caller's rows of `name`, filtered by the query's columns. The query schema is open (the
 * filters are the projection's columns, which the description cannot list): `ProjectionQuery.rows` checks
 * each name and value against the projection and refuses an unknown one, naming it.
 */
const read = (name: string, query: Readonly<Record<string, string | undefined>>) =>
  Effect.gen(function*() {
    const registry = yield* Registry.Registry
    const projection = registry.projection(name)
    if (!projection) return yield* new Failure.NotFound({ message: `no projection "${name}" (known: ${registry.projections.map((p) => p.name).join(", ")})` })
    const { tenantId } = yield* Caller
    const page = ProjectionQuery.rows(projection, tenantId, query)
    if (Result.isFailure(page)) return yield* new Failure.InvalidInput({ code: "invalid_query", message: Issues.render(page.failure), problems: page.failure })
    // The projection's database for this tenant (its home, where the projection was moved, or its parts merged: docs/placement.md).
    const [rows, catching] = yield* Effect.all([
      ProjectionFanOut.read(projection, tenantId, query, page.success).pipe(Effect.mapError(ProjectionStore.notMigrated(projection))),
      CatchUp.readStatus(projection)
    ], { concurrency: 2 })
    const booleans = Projection.booleanColumns(projection)
    return {
      projection: projection.name,
      data: rows.slice(0, page.success.limit).map((row) => {
        const out: Record<string, unknown> = { ...row }
        for (const b of booleans) if (out[b] !== null && out[b] !== undefined) out[b] = out[b] === 1
        return out
      }),
      next_cursor: page.success.nextCursor(rows),
      ...(catching === undefined ? {} : { status: catching.status, catch_up: { progress: catching.progress, since: catching.since } })
    }
  })

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "projections", (handlers) =>
  handlers
    .handle("readProjection", ({ params, query }) => read(params.name, query))
    .handle("listProjections", () => Effect.map(CatchUp.list(), (data) => ({ data })))
    .handle("catchUpProjections", () => Effect.gen(function*() {
      const steps = yield* CatchUp.tick()
      return { steps, data: yield* CatchUp.list() }
    })))
