/**
 * What an erasure (Erasure.ts) cleans, store by store, once the subject's keys are gone: each projection's rows of
 * the subject by its `erasure` declaration (delete, or mask columns to the marker), the error texts of its dead
 * letters, the response snippets and errors of its webhook attempts and its runs' errors and kept bodies (found by
 * their `data_subject`), the errors of the workflow instances its facts started (found through the facts copy), and
 * the tenant's export files that hold the subject (ErasureExports.ts).
 * Each cleaning is one idempotent statement (or a walk of them): run again, it finds nothing left and counts 0.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Projection from "../definitions/Projection.js"
import * as Failure from "../failures/Failure.js"
import { erased } from "../personal/Personal.js"
import { PayloadBucket } from "../platform/Bindings.js"
import * as Sql from "../platform/Sql.js"
import * as Placement from "../placement/Placement.js"
import * as Parts from "../placement/Parts.js"
import { Registry } from "../registry/Registry.js"
import * as Exports from "./ErasureExports.js"

/** Fact ids of the subject read from the facts copy per page (the workflow instances they started are cleaned). */
export const factsPerPage = 500

const unavailable = Failure.unavailable("the read database")
const platformUnavailable = Failure.unavailable("the platform database")

/** A cleaning of one store: its name and what it did (a count per action). */
export interface Cleaner {
  readonly store: string
  readonly clean: Effect.Effect<Readonly<Record<string, number>>, Failure.Named<Sql.SqlFailure>>
}

const q = (name: string) => `"${name.replaceAll('"', '""')}"`

/** The projections' cleanings: delete or mask the subject's rows, by the projection's erasure declaration. */
export const projectionStatement = (p: Projection.Projection, tenantId: string, subject: string): { readonly action: "deleted" | "masked"; readonly statement: Sql.Statement } | undefined => {
  const erasure = p.erasure
  if (erasure === undefined || erasure.action === "none") return undefined
  const table = q(Projection.tableName(p))
  if (erasure.action === "delete") {
    return { action: "deleted", statement: Sql.statement(`DELETE FROM ${table} WHERE tenant_id = ? AND ${q(erasure.subject)} = ?`, tenantId, subject) }
  }
  const set = erasure.columns.map((c) => `${q(c)} = CASE WHEN ${q(c)} IS NULL THEN NULL ELSE ?3 END`).join(", ")
  const changed = erasure.columns.map((c) => `(${q(c)} IS NOT NULL AND ${q(c)} IS NOT ?3)`).join(" OR ")
  return {
    action: "masked",
    statement: Sql.statement(`UPDATE ${table} SET ${set} WHERE tenant_id = ?1 AND ${q(erasure.subject)} = ?2 AND (${changed})`, tenantId, subject, erased)
  }
}

const Id = Schema.Struct({ id: Schema.String })

/**
 * What the cleaning waits for, if anything runs: a projection rebuild (its shadow table could bring back rows mapped
 * before the keys went) or an export of the tenant created before `cleanAfter` (its file may hold opened fields).
 */
export const running = (sql: Sql.Sql, tenantId: string, cleanAfter: string) =>
  Effect.gen(function*() {
    const platform = yield* Sql.PlatformDatabase
    const rebuilding = yield* Effect.mapError(platform.first(Id, Sql.statement("SELECT id FROM projection_rebuilds WHERE status = 'running' LIMIT 1")), platformUnavailable)
    if (rebuilding) return `rebuild ${rebuilding.id}`
    const exporting = yield* Exports.running(sql, tenantId, cleanAfter)
    return exporting === undefined ? undefined : `export ${exporting} (created before the keys went)`
  })

/** The key generations earlier finished erasures of the subject destroyed (an erasure's own are the rest). */
export const erasedBefore = (sql: Sql.Sql, erasure: { readonly id: string; readonly tenant_id: string; readonly subject: string }) =>
  Effect.map(
    Effect.mapError(sql.all(Schema.Struct({ progress: Schema.String }), Sql.statement(
      "SELECT progress FROM subject_erasures WHERE tenant_id = ? AND subject = ? AND id <> ? AND phase = 'erased'",
      erasure.tenant_id, erasure.subject, erasure.id
    )), unavailable),
    (rows) => new Set(rows.flatMap((row) => (JSON.parse(row.progress) as { generations?: ReadonlyArray<number> }).generations ?? []))
  )

/** The erasure a cleaning belongs to: its id, when its cleaning may start (`clean_after`) and the step's time. */
export interface Context {
  readonly erasureId: string
  readonly cleanAfter: string
  readonly now: string
}

export const cleaners = (sql: Sql.Sql, tenantId: string, subject: string, context: Context) =>
  Effect.gen(function*() {
    const registry = yield* Registry
    const platform = yield* Sql.PlatformDatabase
    const count = (sql: Sql.Sql, statement: Sql.Statement, action: string, failure: (e: Sql.SqlFailure) => Failure.Named<Sql.SqlFailure>) =>
      Effect.map(Effect.mapError(sql.run(statement), failure), (n) => ({ [action]: n }))
    const list: Array<Cleaner> = []
    const placement = yield* Placement.TenantPlacement
    for (const p of registry.projections) {
      const cleaning = projectionStatement(p, tenantId, subject)
      // In the database holding the tenant's projection (its home, where the projection was moved, or each of its
      // parts: a subject's rows may be in any); held while it moves.
      const projectionSql = Effect.mapError(Parts.doors(placement, tenantId, true, p.name), unavailable)
      if (cleaning !== undefined) {
        list.push({
          store: `projection:${p.name}`,
          clean: Effect.flatMap(projectionSql, (dbs) =>
            Effect.map(Effect.forEach(dbs, (db) => count(db, cleaning.statement, cleaning.action, unavailable)), (counts) =>
              ({ [cleaning.action]: counts.reduce((n, c) => n + (c[cleaning.action] ?? 0), 0) })))
        })
      }
    }
    list.push({ store: "exports", clean: Exports.clean(sql, yield* PayloadBucket, registry, tenantId, subject, context.erasureId, context.cleanAfter, context.now) })
    list.push({
      store: "dead_messages",
      clean: count(sql, Sql.statement(
        "UPDATE dead_messages SET last_error = ?3, stack = NULL WHERE tenant_id = ?1 AND data_subject = ?2 AND (last_error IS NOT ?3 OR stack IS NOT NULL)",
        tenantId, subject, erased
      ), "blanked", unavailable)
    })
    list.push({
      store: "webhook_attempts",
      clean: count(sql, Sql.statement(
        "UPDATE webhook_attempts SET response_snippet = NULL, error = NULL WHERE tenant_id = ? AND data_subject = ? AND (response_snippet IS NOT NULL OR error IS NOT NULL)",
        tenantId, subject
      ), "blanked", unavailable)
    })
    list.push({
      store: "runs",
      clean: count(platform, Sql.statement(
        "UPDATE runs SET error = NULL, body = NULL WHERE tenant_id = ? AND data_subject = ? AND (error IS NOT NULL OR body IS NOT NULL)",
        tenantId, subject
      ), "blanked", platformUnavailable)
    })
    list.push({ store: "workflow_instances", clean: workflowErrors(sql, tenantId, subject, registry, platform) })
    return list
  })

/**
 * The errors of the workflow instances started by the subject's facts: the facts of each type declaring personal
 * data whose subject field names it, read from the facts copy a page at a time, their instances blanked.
 */
const workflowErrors = (sql: Sql.Sql, tenantId: string, subject: string, registry: Registry["Service"], platform: Sql.Sql) =>
  Effect.gen(function*() {
    const fields = personalFactFields(registry)
    if (fields.length === 0) return { blanked: 0 }
    let blanked = 0
    let after: [string, string] = ["", ""]
    for (;;) {
      const page = yield* Effect.mapError(sql.all(Schema.Struct({ fact_id: Schema.String, created_at: Schema.String }), subjectFactsStatement(tenantId, subject, fields, after, factsPerPage)), unavailable)
      if (page.length > 0) {
        blanked += yield* Effect.mapError(platform.run(Sql.statement(
          "UPDATE workflow_instances SET error = NULL WHERE tenant_id = ? AND error IS NOT NULL AND start_fact_id IN (SELECT value FROM json_each(?))",
          tenantId, JSON.stringify(page.map((f) => f.fact_id))
        )), platformUnavailable)
      }
      if (page.length < factsPerPage) return { blanked }
      const last = page.at(-1)!
      after = [last.created_at, last.fact_id]
    }
  })

/** Each fact type declaring personal data, with the field naming its subject. */
export const personalFactFields = (registry: Pick<Registry["Service"], "personalFact" | "facts">): ReadonlyArray<{ readonly type: string; readonly field: string }> =>
  [...registry.facts.keys()].flatMap((type) => {
    const declaration = registry.personalFact(type)
    return declaration === undefined ? [] : [{ type, field: declaration.subject }]
  })

/** The facts copy's facts of the subject (by each personal type's subject field), in key order after `after`. */
export const subjectFactsStatement = (tenantId: string, subject: string, fields: ReadonlyArray<{ readonly type: string; readonly field: string }>, after: readonly [string, string], limit: number, columns = "fact_id, created_at") =>
  Sql.statement(
    `SELECT ${columns} FROM facts WHERE tenant_id = ? AND (created_at, fact_id) > (?, ?) AND (${fields.map(() => "(type = ? AND json_extract(body, ?) = ?)").join(" OR ")})
     ORDER BY created_at, fact_id LIMIT ${limit}`,
    tenantId, after[0], after[1], ...fields.flatMap((f) => [f.type, `$.${JSON.stringify(f.field)}`, subject])
  )

