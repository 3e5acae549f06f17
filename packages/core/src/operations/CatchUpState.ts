/**
 * What an operator sees of a projection's version (CatchUp): its stored row in `projection_versions`, the row
 * joined with its rebuild's progress, and the state the running code reads off them. Pure; CatchUp re-exports
 * Status, Row and State.
 */
import * as Schema from "effect/Schema"
import * as Projection from "../definitions/Projection.js"
import * as Rebuild from "../projections/Rebuild.js"

export type Status = "catching_up" | "current" | "not_migrated"

/** A stored row. */
/** A projection's row in `projection_versions`. */
export const Row = Schema.Struct({
  projection: Schema.String,
  version: Schema.Number,
  status: Schema.Literals(["catching_up", "current", "not_migrated"]),
  rebuild_id: Schema.NullOr(Schema.String),
  detail: Schema.NullOr(Schema.String),
  updated_at: Schema.String
})
export type Row = typeof Row.Type

/** What an operator sees of one registered projection. */
export interface State {
  readonly projection: string
  /** The definition's mapping version (what the running code maps with). */
  readonly version: number
  /** `unchecked`: no scheduled run has compared it yet (no row). */
  readonly status: Status | "unchecked"
  /** The version the deployment's row records (null without a row). */
  readonly recorded_version: number | null
  readonly detail: string | null
  /** The replay bringing it up to date (the system's rebuild), while catching up or once done. */
  readonly rebuild: {
    readonly batch_id: string
    readonly status: Rebuild.RebuildRecord["status"]
    readonly shards_done: number
    readonly shards_total: number
    readonly facts_replayed: number
    readonly facts_failed: number
    readonly started_at: string
    readonly finished_at: string | null
  } | null
  readonly updated_at: string | null
}

/** A version's row with its rebuild's progress (`joined`). */
export const Joined = Schema.Struct({
  ...Row.fields,
  r_status: Schema.NullOr(Rebuild.RebuildRecord.fields.status),
  shards_done: Schema.NullOr(Schema.Number),
  shards_total: Schema.NullOr(Schema.Number),
  facts_replayed: Schema.NullOr(Schema.Number),
  facts_failed: Schema.NullOr(Schema.Number),
  started_at: Schema.NullOr(Schema.String),
  finished_at: Schema.NullOr(Schema.String)
})
export type Joined = typeof Joined.Type

export const joined = `SELECT v.*, r.status AS r_status, r.shards_done, r.shards_total, r.facts_replayed, r.facts_failed, r.started_at, r.finished_at
  FROM projection_versions v LEFT JOIN projection_rebuilds r ON r.id = v.rebuild_id`

/**
 * A row's status as the running code sees it: a version other than the definition's is catching up (the
 * next tick starts it), and a replay that has swapped is current (the next tick records it).
 */
const statusOf = (p: Projection.Projection, row: Joined | undefined): State["status"] => {
  if (row === undefined) return "unchecked"
  if (row.version !== Projection.versionOf(p)) return row.status === "not_migrated" ? "not_migrated" : "catching_up"
  if (row.status === "catching_up" && row.r_status === "completed") return "current"
  return row.status
}

export const stateOf = (p: Projection.Projection, row: Joined | undefined): State => ({
  projection: p.name,
  version: Projection.versionOf(p),
  status: statusOf(p, row),
  recorded_version: row?.version ?? null,
  detail: row?.detail ?? null,
  rebuild: row?.rebuild_id && row.r_status
    ? {
      batch_id: row.rebuild_id,
      status: row.r_status,
      shards_done: row.shards_done ?? 0,
      shards_total: row.shards_total ?? 0,
      facts_replayed: row.facts_replayed ?? 0,
      facts_failed: row.facts_failed ?? 0,
      started_at: row.started_at ?? "",
      finished_at: row.finished_at
    }
    : null,
  updated_at: row?.updated_at ?? null
})
