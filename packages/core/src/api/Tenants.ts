/**
 * Where a tenant's read side lives (core's Placement): `GET /v1/tenants/me` tells a tenant's analysts which
 * read database holds their rows (to query it with `wrangler d1 execute` or Drizzle); the platform scope lists
 * every placement with each database's tenant count (`GET /v1/tenants`) and places a tenant that has not been
 * used yet on a chosen database (`PUT /v1/tenants/:tenant/placement`) — a large customer on its own database —
 * or removes a placement that holds no data (`DELETE /v1/tenants/:tenant/placement`) —
 * and moves a tenant to another database under live traffic (`POST /v1/tenants/:tenant/moves`, core's Move:
 * a resumable operation of the batch queue), following it with `GET /v1/tenants/:tenant/moves/:move_id`; and deletes a
 * departed tenant's whole data (`DELETE /v1/tenants/:tenant`, core's Deletion), followed with `GET /v1/tenants/:tenant/deletion`.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { TenantId } from "@factline/schemas"
import { describe, problems } from "./Contract.js"
import { Edge } from "./Edge.js"

/** A tenant's move (core's placement/Move.ts reads and writes it). */
export const phases = ["frozen", "copying", "switched", "dropped", "failed"] as const

export const MoveView = Schema.Struct({
  move_id: Schema.String,
  tenant_id: Schema.String,
  from_database: Schema.Int,
  to_database: Schema.Int,
  projection: Schema.NullOr(Schema.String).annotate({ description: "The one projection moved (its rows of the tenant and their applied set), or null: the tenant's home — every table of its read side but its projections placed elsewhere" }),
  parts: Schema.NullOr(Schema.Array(Schema.Int)).annotate({ description: "A split of `projection` into parts: the read database of each part (a row goes to part hash(its key) mod their count), or null: moved whole" }),
  phase: Schema.Literals(phases).annotate({ description: "`frozen` (the tenant's writes held) → `copying` → `switched` (reads and writes on the target) → `dropped` (the source's rows deleted: done), or `failed`" }),
  copy_round: Schema.Int.annotate({ description: "1, or more when verification found a difference and the copy started again" }),
  copied: Schema.Record(Schema.String, Schema.Int).annotate({ description: "Rows copied per table in this round" }),
  verified: Schema.NullOr(Schema.Record(Schema.String, Schema.Struct({ rows: Schema.Int, equal: Schema.Boolean }))).annotate({ description: "Per table: the tenant's rows and whether source and target agreed (count, lengths and sums of every column)" }),
  error: Schema.NullOr(Schema.String),
  started_by: Schema.String,
  started_at: Schema.String,
  updated_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
}).annotate({ identifier: "TenantMove" })

/** A tenant's deletion (core's placement/Deletion.ts reads and writes it). */
export const deletionPhases = ["held", "workflows", "ledger", "objects", "rows", "verified", "deleted", "failed"] as const

/** Per store (`d1:<binding>`, `ledger`, `r2`, `workflows`), a count per table, shard group, prefix or outcome. */
const PerStore = Schema.Record(Schema.String, Schema.Record(Schema.String, Schema.Int))

export const DeletionView = Schema.Struct({
  deletion_id: Schema.String,
  tenant_id: Schema.String,
  phase: Schema.Literals(deletionPhases).annotate({
    description: "`held` (the tenant's writes held, waiting until every isolate sees it) → `workflows` (running instances terminated) → `ledger` (every shard and the key store emptied) → `objects` (R2) → `rows` (every D1 database) → `verified` (a re-count found nothing left) → `deleted` (the placement removed: done), or `failed`"
  }),
  round: Schema.Int.annotate({ description: "1, or more when the re-count found something left (a write that landed after its store was emptied) and the deletion ran again" }),
  removed: PerStore.annotate({ description: "What was removed so far, per store: rows per table (`d1:<binding>`), objects per prefix (`r2`), shard objects emptied (`ledger`), instances terminated (`workflows`)" }),
  remaining: Schema.NullOr(PerStore).annotate({ description: "The last re-count of what is left of the tenant, per store (every count 0 once `deleted`); null before the first" }),
  error: Schema.NullOr(Schema.String),
  started_by: Schema.String,
  started_at: Schema.String,
  updated_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
}).annotate({ identifier: "TenantDeletion" })

/** A tenant's reshard (core's placement/Reshard.ts reads and writes it). */
export const reshardPhases = ["running", "done", "failed"] as const
export const reshardStages = ["hold", "copy", "verify", "switch", "drop"] as const

export const ReshardView = Schema.Struct({
  reshard_id: Schema.String,
  tenant_id: Schema.String,
  from_shards: Schema.Int,
  to_shards: Schema.Int,
  phase: Schema.Literals(reshardPhases).annotate({ description: "`running`, `done` (the tenant's shard count is `to_shards`), or `failed` with its error (ask again for the same count to resume)" }),
  shard: Schema.Int.annotate({ description: "The old shard being worked on (0 … from_shards − 1), one at a time" }),
  stage: Schema.Literals(reshardStages).annotate({ description: "Of that shard: `hold` (its moving streams' appends answered retryably) → `copy` → `verify` → `switch` (they are served by their new shards) → `drop` (deleted from the old shard)" }),
  shards_done: Schema.Int.annotate({ description: "Old shards whose moving streams are switched and dropped" }),
  facts_copied: Schema.Int,
  streams_moved: Schema.Int,
  rows_carried: Schema.Int.annotate({ description: "Timers, decider snapshots and outbox rows carried with the moved streams" }),
  error: Schema.NullOr(Schema.String),
  started_by: Schema.String,
  started_at: Schema.String,
  updated_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
}).annotate({ identifier: "TenantReshard" })

const PlacementView = Schema.Struct({
  tenant_id: Schema.String,
  read_database: Schema.Int.annotate({ description: "Index of the tenant's read database" }),
  binding: Schema.String.annotate({ description: "Its binding: `FACTLINE_READ_DB_<n>`, or `DB` for read database 0 when it is the platform database" }),
  placed_at: Schema.String,
  writes_held_since: Schema.NullOr(Schema.String).annotate({ description: "Set while a move takes the tenant's last copy" }),
  projections: Schema.Record(Schema.String, Schema.Struct({
    read_database: Schema.Int,
    binding: Schema.String,
    writes_held_since: Schema.NullOr(Schema.String).annotate({ description: "Set while a move of the projection takes its last copy" }),
    parts: Schema.optional(Schema.Array(Schema.Struct({ read_database: Schema.Int, binding: Schema.String }))).annotate({ description: "A projection in parts: each part's read database, in part order (a row is in part hash(its key) mod their count); `read_database` is the first part's" })
  })).annotate({ description: "The tenant's projections placed on another read database than its home (moved there, or split into parts), by name: their rows are there, not in `read_database`" })
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

const tenantParam = { tenant: TenantId.annotate({ description: "A tenant id: 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit" }) }

export const place = HttpApiEndpoint.put("placeTenant", "/v1/tenants/:tenant/placement", {
  params: tenantParam,
  payload: Schema.Struct({ read_database: Schema.Int }),
  success: PlacementView,
  error: problems(400, 409, 415, 503)
}).pipe(describe({
  summary: "Place a tenant",
  description: "Places a tenant not used yet on the given read database. A placed tenant keeps its database: placing it elsewhere is a 409 (move it instead); placing it where it is answers its placement.",
  scopes: ["platform"],
  usage: 'send { "read_database": <index> }',
  errors: { 400: "`invalid_request`: not a tenant id, or no such read database", 409: "`conflict`: the tenant is already placed on another database", 415: "`unsupported_media_type`", 503: "`unavailable`: the placement map; retry" }
}))

export const removePlacement = HttpApiEndpoint.delete("removePlacement", "/v1/tenants/:tenant/placement", {
  // Any id that was placed, valid or not: ids placed before they were checked must be removable too.
  params: { tenant: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(10_000)).annotate({ description: "The placed tenant id, as listed" }) },
  success: Schema.Struct({
    tenant_id: Schema.String,
    read_database: Schema.Int,
    outcome: Schema.Literals(["removed", "deleted"]).annotate({
      description: "`removed`: neither listed nor counted any more; the tenant's next use places it again on the same database. `deleted`: the row is gone (not a valid tenant id: nothing can ever write under it)"
    })
  }),
  error: problems(404, 409, 503)
}).pipe(describe({
  summary: "Remove a placement that holds no data",
  description: "For a tenant placed by mistake (or an id placed before ids were checked): refused while a move holds it or while it holds anything — a ledger, or a row in any table a move would copy (the 409 names them).",
  scopes: ["platform"],
  errors: { 404: "`not_found`: the tenant is not placed", 409: "`conflict`: the tenant holds data, or is being moved", 503: "`unavailable`: the placement map; retry" }
}))

export const startMove = HttpApiEndpoint.post("moveTenant", "/v1/tenants/:tenant/moves", {
  params: tenantParam,
  payload: Schema.Struct({
    to_database: Schema.optional(Schema.Int.annotate({ description: "Index of the read database to move the tenant (or its projection) to (or `parts`)" })),
    projection: Schema.optional(Schema.String.annotate({
      description: "A registered projection: move only the tenant's rows of it (a tenant larger than one database); its other tables stay in its home. Moving it to the tenant's home brings it back."
    })),
    parts: Schema.optional(Schema.Array(Schema.Int).annotate({
      description: "Instead of `to_database`, with `projection`: split the projection (placed whole) into 2, 4, 8 or 16 parts, on these read databases in part order (one may hold several parts; none may be the one it leaves) — a row goes to part hash(its key) mod their count: a projection larger than one database"
    }))
  }),
  success: MoveView.pipe(HttpApiSchema.status(202)),
  error: problems(400, 404, 409, 415, 503)
}).pipe(describe({
  summary: "Move a tenant to another read database",
  description: "Starts moving the tenant's read side (facts copy, projections, accepted keys, dead letters, webhook state, batch jobs) under live traffic: its writes are held (consumers retry; its HTTP writes answer 503 with `retry-after`) while its rows are copied and verified, then its placement switches and the source's rows are deleted. Reads are served from the source until the switch, never from a half-copied database. With `projection`, only the tenant's rows of that projection move, and only its writes are held (events are accepted; the projection's facts wait). With `projection` and `parts`, the projection placed whole is split into parts on those databases the same way (its rows copied each to its part, verified, switched, dropped); a projection in parts is not moved again. Projections placed elsewhere stay where they are when the tenant's home moves. Follow it with `GET /v1/tenants/{tenant}/moves/{move_id}`.",
  scopes: ["platform"],
  usage: 'send { "to_database": <index> }, { "to_database": <index>, "projection": "<name>" } or { "projection": "<name>", "parts": [<index>, <index>] }',
  errors: { 400: "`invalid_request`: not a tenant id, no such read database, no such projection, or `parts` not 2, 4, 8 or 16 read databases other than the projection's (with `projection`, instead of `to_database`)", 404: "`not_found`: the tenant is not placed yet (place it instead)", 409: "`conflict`: the tenant (or projection) is already there, already being moved, or a rebuild (or a reconcile of the projection) is running", 415: "`unsupported_media_type`", 503: "`unavailable`: the platform database or the batch queue; retry" }
}))

export const getMove = HttpApiEndpoint.get("getTenantMove", "/v1/tenants/:tenant/moves/:move_id", {
  params: { ...tenantParam, move_id: Schema.String },
  success: MoveView,
  error: problems(400, 404, 503)
}).pipe(describe({
  summary: "A tenant's move",
  description: "Its phase (`frozen` → `copying` → `switched` → `dropped`, or `failed` with its error), rows copied per table and the verification of each table.",
  scopes: ["platform"],
  errors: { 400: "`invalid_request`: not a tenant id", 404: "`not_found`: no such move of this tenant", 503: "`unavailable`: the platform database; retry" }
}))

export const deleteTenant = HttpApiEndpoint.delete("deleteTenant", "/v1/tenants/:tenant", {
  params: tenantParam,
  success: DeletionView.pipe(HttpApiSchema.status(202)),
  error: problems(400, 404, 409, 503)
}).pipe(describe({
  summary: "Delete a tenant's whole data",
  description: "Removes a departed customer from every store, as a resumable operation of the batch queue: its writes are held, its running workflow instances terminated, every ledger shard and its personal-data key store emptied, its R2 objects (archive, offloaded payloads, kept events, batch files, uploads, spilled dead letters) deleted, every row of it in every D1 database deleted, then everything re-counted (each count must be 0) before its placement goes. Follow it with `GET /v1/tenants/{tenant}/deletion`. Idempotent: while a deletion runs, or once it has finished and nothing of the tenant came back, the same deletion is answered. Events of the tenant that arrive afterwards start a new, empty tenant: revoke its tokens first.",
  scopes: ["platform"],
  errors: { 400: "`invalid_request`: not a tenant id", 404: "`not_found`: nothing is known of the tenant", 409: "`conflict`: the tenant is being moved, or a rebuild is running", 503: "`unavailable`: the platform database or the batch queue; retry" }
}))

export const getDeletion = HttpApiEndpoint.get("getTenantDeletion", "/v1/tenants/:tenant/deletion", {
  params: tenantParam,
  success: DeletionView,
  error: problems(400, 404, 503)
}).pipe(describe({
  summary: "A tenant's deletion",
  description: "The latest deletion of the tenant: its phase, what it removed per store, and the re-count of what is left (every count 0 once `deleted`); `failed` with its error (a new `DELETE` resumes: every phase is idempotent).",
  scopes: ["platform"],
  errors: { 400: "`invalid_request`: not a tenant id", 404: "`not_found`: the tenant was never deleted", 503: "`unavailable`: the platform database; retry" }
}))

export const startReshard = HttpApiEndpoint.post("reshardTenant", "/v1/tenants/:tenant/ledger/reshard", {
  params: tenantParam,
  payload: Schema.Struct({ shards: Schema.Int.annotate({ description: "The new shard count: larger than the tenant's, a multiple of it, at most 1024" }) }),
  success: ReshardView.pipe(HttpApiSchema.status(202)),
  error: problems(400, 404, 409, 415, 503)
}).pipe(describe({
  summary: "Raise a tenant's ledger shard count",
  description: "Starts moving the streams of each of the tenant's ledger shards that belong to a new shard under the new count, one old shard at a time, under live traffic: a moving stream's appends are answered retryably (a few seconds: consumers retry, a decider's command is retried), its facts are copied with their ids and sequences, verified, switched (callers with a stale topology are redirected by the old shard) and deleted from the old shard. Facts keep their ids and streams their order; expected versions hold across the switch. Asking again for the count in progress answers it; after a failure it resumes where it stopped. Follow it with `GET /v1/tenants/{tenant}/ledger/reshard`.",
  scopes: ["platform"],
  usage: 'send { "shards": <count> }',
  errors: { 400: "`invalid_request`: not a tenant id; a count not larger than the tenant's, not a multiple of it, or above 1024", 404: "`not_found`: the tenant has no ledger yet", 409: "`conflict`: a reshard to another count is in progress or stopped part-way, a rebuild is running, or the tenant is being deleted", 415: "`unsupported_media_type`", 503: "`unavailable`: the platform database or the batch queue; retry" }
}))

export const getReshard = HttpApiEndpoint.get("getTenantReshard", "/v1/tenants/:tenant/ledger/reshard", {
  params: tenantParam,
  success: ReshardView,
  error: problems(400, 404, 503)
}).pipe(describe({
  summary: "A tenant's reshard",
  description: "The latest reshard of the tenant: the old shard being worked on and its stage, facts copied, streams moved; `failed` with its error.",
  scopes: ["platform"],
  errors: { 400: "`invalid_request`: not a tenant id", 404: "`not_found`: the tenant was never resharded", 503: "`unavailable`: the platform database; retry" }
}))

export const group = HttpApiGroup.make("tenants").add(me).add(list).add(place).add(removePlacement).add(startMove).add(getMove).add(deleteTenant).add(getDeletion).add(startReshard).add(getReshard).middleware(Edge)
  .annotateMerge(OpenApi.annotations({ title: "Tenants", description: "Which read database holds each tenant's read side, moving a tenant between them, and deleting a departed tenant's whole data." }))
