/**
 * Exporting what the read side holds of a data subject (`GET /v1/subjects/:subject/export`), the access request's
 * counterpart to the erasure: the subject's facts in the tenant's facts copy (D1 `facts`: each fact type declaring
 * personal data whose subject field names the subject, found with `json_extract` on the stored data), opened for
 * the answer, and each projection's rows of the subject (by its erasure declaration's subject column).
 *
 * It does not cover: facts older than the facts copy's window (`FACTLINE_FACTS_WINDOW_DAYS`; they are in the ledger
 * and the archive), facts of types that declare no personal data, what webhook receivers hold, messages in flight.
 * The answer says so (`covers`). Lists stop at `maxFacts` facts and `maxRows` rows per projection (`truncated`).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { Fact } from "@factline/schemas"
import type { SubjectExportView } from "../api/Subjects.js"
import { FactsWindow } from "../archive/Archive.js"
import * as Projection from "../definitions/Projection.js"
import * as Failure from "../failures/Failure.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import * as Sql from "../platform/Sql.js"
import * as Placement from "../placement/Placement.js"
import * as Parts from "../placement/Parts.js"
import * as Time from "../platform/Time.js"
import { Registry } from "../registry/Registry.js"
import * as Stores from "./ErasureStores.js"

export const maxFacts = 1_000
export const maxRows = 1_000

const FactRow = Schema.Struct({
  fact_id: Schema.String,
  stream: Schema.String,
  sequence: Schema.Number,
  type: Schema.String,
  body: Schema.String,
  causation_id: Schema.String,
  correlation_id: Schema.String,
  caused_by: Schema.String,
  created_at: Schema.String,
  schema_version: Schema.Number
})
const TableRow = Schema.Record(Schema.String, Schema.Unknown)

const unavailable = Failure.unavailable("the read database")

/** What the export covers, in words (the answer's `covers`). */
export const covers = (windowDays: number | null) =>
  `The subject's facts in the read side's facts copy (${windowDays === null ? "every fact copied" : `the last ${windowDays} days`}) of the fact types that declare personal data, ` +
  "their personal fields opened ([erased] once the subject was erased), and each projection's rows of the subject (by its erasure subject column). " +
  "Not covered: facts older than the copy's window (in the ledger and the archive: read the streams), facts of types that declare no personal data, " +
  "what webhook receivers hold, messages still in flight on a queue."

/** The export of `subject` in `tenantId` (within the tenant's read scope). */
export const exportSubject = Effect.fn("SubjectExport.exportSubject")(function*(tenantId: string, subject: string) {
  const sql = yield* Sql.ReadDatabase
  const registry = yield* Registry
  const keyRing = yield* KeyRing
  const window = yield* Effect.serviceOption(FactsWindow)
  const windowDays = Option.match(window, { onNone: () => null, onSome: ({ days }) => (days > 0 ? days : null) })
  const fields = Stores.personalFactFields(registry)
  const rows = fields.length === 0
    ? []
    : yield* Effect.mapError(sql.all(FactRow, Stores.subjectFactsStatement(
      tenantId, subject, fields, ["", ""], maxFacts + 1,
      "fact_id, stream, sequence, type, body, causation_id, correlation_id, caused_by, created_at, schema_version"
    )), unavailable)
  const stored: Array<Fact> = rows.slice(0, maxFacts).map((r) => ({
    fact_id: r.fact_id, tenant_id: tenantId, stream: r.stream, sequence: r.sequence, type: r.type as Fact["type"],
    data: JSON.parse(r.body) as Record<string, unknown>, schema_version: r.schema_version,
    causation_id: r.causation_id, correlation_id: r.correlation_id, caused_by: r.caused_by, created_at: r.created_at
  }))
  const opened = yield* Sealing.openFacts(keyRing, registry.personalFact, stored)
  let truncated = rows.length > maxFacts
  const projections: Array<{ projection: string; rows: ReadonlyArray<Record<string, unknown>> }> = []
  const placement = yield* Placement.TenantPlacement
  for (const p of registry.projections) {
    const erasure = p.erasure
    if (erasure === undefined || erasure.action === "none") continue
    // Read where the tenant's projection lives (its home, the database it was moved to, or each of its parts).
    const dbs = yield* Effect.mapError(Parts.placed(placement, tenantId, false, p.name), unavailable)
    const found = (yield* Effect.forEach(dbs, ({ sql: db, share }) => Effect.mapError(db.all(TableRow, Sql.statement(
      `SELECT * FROM "${Projection.tableName(p).replaceAll('"', '""')}" WHERE tenant_id = ? AND "${erasure.subject.replaceAll('"', '""')}" = ? LIMIT ${maxRows + 1}`,
      tenantId, subject
    )), unavailable).pipe(Effect.map((rows) => rows.filter((row) => Parts.inShare(p, row, share)))))).flat()
    if (found.length > maxRows) truncated = true
    projections.push({ projection: p.name, rows: found.slice(0, maxRows) })
  }
  return {
    tenant_id: tenantId,
    subject,
    exported_at: yield* Time.now,
    facts: opened.map((f) => ({ fact_id: f.fact_id, stream: f.stream, sequence: f.sequence, type: f.type, data: f.data, created_at: f.created_at })),
    facts_window_days: windowDays,
    projections,
    truncated,
    covers: covers(windowDays)
  } satisfies typeof SubjectExportView.Type
})
