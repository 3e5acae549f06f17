/**
 * The handlers of the Tenants routes, implemented against their description (`@factline/core/api`'s `Tenants`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { Failure } from "@factline/core"
import { BatchStart, Deletion, Move, Placement, Reshard } from "@factline/core/runtime"
import { apiOf, Caller } from "./Edge.js"
import { Tenants as Description } from "@factline/core/api"

const view = (shape: Placement.Shape, placement: Placement.Placement) => ({
  tenant_id: placement.tenantId,
  read_database: placement.database,
  binding: bindingOf(shape, placement.database),
  placed_at: placement.placedAt,
  writes_held_since: placement.frozenSince,
  projections: Object.fromEntries(Object.entries(placement.projections).map(([name, p]) => [name, {
    read_database: p.database,
    binding: bindingOf(shape, p.database),
    writes_held_since: p.frozenSince,
    ...(p.parts ? { parts: p.parts.map((d) => ({ read_database: d, binding: bindingOf(shape, d) })) } : {})
  }]))
})

/** Read database 0 is the platform's own `DB` when no `FACTLINE_READ_DB_0` is bound. */
const bindingOf = (shape: Placement.Shape, index: number) =>
  shape.databases[index]?.identity === shape.platform.identity ? "DB" : `FACTLINE_READ_DB_${index}`

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "tenants", (handlers) =>
  handlers
    .handle("tenantPlacement", () =>
      Effect.gen(function*() {
        const { tenantId } = yield* Caller
        return view(yield* Placement.TenantPlacement, yield* Placement.of(tenantId))
      }))
    .handle("listPlacements", () =>
      Effect.gen(function*() {
        const shape = yield* Placement.TenantPlacement
        const [counts, placements] = yield* Effect.all([shape.counts(), shape.list(1_000)])
        return {
          databases: counts.map((tenants, i) => ({ read_database: i, binding: bindingOf(shape, i), tenants })),
          data: placements.map((placement) => view(shape, placement))
        }
      }))
    .handle("placeTenant", ({ params, payload }) =>
      Effect.gen(function*() {
        const shape = yield* Placement.TenantPlacement
        return view(shape, yield* shape.place(params.tenant, payload.read_database))
      }))
    .handle("removePlacement", ({ params }) => Move.removePlacement(params.tenant))
    .handle("moveTenant", ({ params, payload }) =>
      Effect.gen(function*() {
        const caller = yield* Caller
        return Move.view(yield* BatchStart.move(params.tenant, payload.to_database, caller.name ?? caller.tenantId, payload.projection, payload.parts))
      }))
    .handle("getTenantMove", ({ params: { tenant, move_id: moveId } }) =>
      Effect.gen(function*() {
        const move = yield* Move.find(moveId)
        if (!move || move.tenant_id !== tenant) return yield* new Failure.NotFound({ message: `no move ${JSON.stringify(moveId.slice(0, 100))} of tenant ${JSON.stringify(tenant)}` })
        return Move.view(move)
      }))
    .handle("deleteTenant", ({ params }) =>
      Effect.gen(function*() {
        const caller = yield* Caller
        return Deletion.view(yield* BatchStart.deleteTenant(params.tenant, caller.name ?? caller.tenantId))
      }))
    .handle("getTenantDeletion", ({ params }) =>
      Effect.gen(function*() {
        const deletion = yield* Deletion.latest(params.tenant)
        if (!deletion) return yield* new Failure.NotFound({ message: `tenant ${JSON.stringify(params.tenant)} was never deleted` })
        return Deletion.view(deletion)
      }))
    .handle("reshardTenant", ({ params, payload }) =>
      Effect.gen(function*() {
        const caller = yield* Caller
        return Reshard.view(yield* BatchStart.reshard(params.tenant, payload.shards, caller.name ?? caller.tenantId))
      }))
    .handle("getTenantReshard", ({ params }) =>
      Effect.gen(function*() {
        const reshard = yield* Reshard.latest(params.tenant)
        if (!reshard) return yield* new Failure.NotFound({ message: `tenant ${JSON.stringify(params.tenant)} was never resharded` })
        return Reshard.view(reshard)
      })))
