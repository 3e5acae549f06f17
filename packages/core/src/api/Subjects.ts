/**
 * A data subject's personal data (docs/personal-data.md): erasing it in one call (`POST /v1/subjects/:subject/erase`,
 * core's personal/Erasure.ts: a resumable operation of the batch queue), following the erasure
 * (`GET /v1/subjects/:subject/erasure`), and exporting what the read side holds of the subject
 * (`GET /v1/subjects/:subject/export`, core's personal/SubjectExport.ts), the access request's counterpart.
 * The subject is the caller's tenant's; its id is the pseudonymous one the definitions' `.personal({ subject })` names.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { describe, problems } from "./Contract.js"
import { Edge } from "./Edge.js"

/** An erasure's phases, in order (core's personal/Erasure.ts). */
export const erasurePhases = ["keys", "waiting", "cleaning", "audit", "erased", "failed"] as const

/** Per store (`d1:<table>` or `d1:<projection>`), a count per action (`deleted`, `masked`, `blanked`). */
const PerStore = Schema.Record(Schema.String, Schema.Record(Schema.String, Schema.Int))

export const ErasureView = Schema.Struct({
  erasure_id: Schema.String,
  tenant_id: Schema.String,
  subject: Schema.String,
  phase: Schema.Literals(erasurePhases).annotate({
    description: "`keys` (the subject's keys being destroyed) → `waiting` (until every isolate has dropped a cached key: the key cache's bound) → `cleaning` (what was derived in plaintext: projection rows deleted or masked, error texts and response snippets blanked) → `audit` (the `subject_erased` fact appended) → `erased` (done), or `failed`"
  }),
  generations_erased: Schema.Array(Schema.Int).annotate({ description: "The key generations this erasure destroyed (empty when the subject had none, or a repeat found them gone)" }),
  keys_erased_at: Schema.NullOr(Schema.String).annotate({ description: "When the keys were destroyed: from then on the subject's sealed fields read as `[erased]`" }),
  clean_after: Schema.NullOr(Schema.String).annotate({ description: "When the cleaning starts: `keys_erased_at` plus the key cache's bound" }),
  removed: PerStore.annotate({ description: "What was removed so far, per store: rows deleted or masked per projection, rows whose texts were blanked per table" }),
  audit_fact_id: Schema.NullOr(Schema.String).annotate({ description: "The `subject_erased` fact recording the erasure (no personal data in it), once appended" }),
  error: Schema.NullOr(Schema.String),
  requested_by: Schema.String,
  started_at: Schema.String,
  updated_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
}).annotate({ identifier: "SubjectErasure" })

export const ExportedFact = Schema.Struct({
  fact_id: Schema.String,
  stream: Schema.String,
  sequence: Schema.Int,
  type: Schema.String,
  data: Schema.Record(Schema.String, Schema.Unknown).annotate({ description: "The fact's data, its personal fields opened (`[erased]` once the subject's keys are gone)" }),
  created_at: Schema.String
})

export const SubjectExportView = Schema.Struct({
  tenant_id: Schema.String,
  subject: Schema.String,
  exported_at: Schema.String,
  facts: Schema.Array(ExportedFact).annotate({ description: "The subject's facts in the read side's facts copy, oldest first: every fact of a type that declares personal data whose subject field names it" }),
  facts_window_days: Schema.NullOr(Schema.Int).annotate({ description: "How far back the facts copy reaches (FACTLINE_FACTS_WINDOW_DAYS); null: unbounded" }),
  projections: Schema.Array(Schema.Struct({
    projection: Schema.String,
    rows: Schema.Array(Schema.Record(Schema.String, Schema.Unknown))
  })).annotate({ description: "Each projection that declares an erasure subject column: its rows of the subject" }),
  truncated: Schema.Boolean.annotate({ description: "True when a list stopped at its limit (1,000 facts, 1,000 rows per projection)" }),
  covers: Schema.String.annotate({ description: "What this export covers and what it does not, in words" })
}).annotate({ identifier: "SubjectExport" })

const subjectParam = {
  subject: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256)).annotate({ description: "The data subject's pseudonymous id, as the definitions' `.personal({ subject })` field holds it" })
}

export const erase = HttpApiEndpoint.post("eraseSubject", "/v1/subjects/:subject/erase", {
  params: subjectParam,
  success: ErasureView.pipe(HttpApiSchema.status(202)),
  error: problems(400, 409, 503)
}).pipe(describe({
  summary: "Erase a data subject's personal data",
  description: "Starts erasing the data subject's personal data in the caller's tenant, as a resumable operation of the batch queue: its keys are destroyed (every sealed personal field of it, in every store, reads `[erased]` from then on), the operation waits out the key cache's bound (FACTLINE_KEY_CACHE_SECONDS) so no isolate still holds a key, then removes what was derived in plaintext — each projection's rows of the subject as its `erasure` declares (deleted, or columns masked to `[erased]`), the error texts of its runs, dead letters and workflow instances, the response snippets of its webhook attempts, and the tenant's export files that hold the subject (deleted; the job stays, its output gone) — and appends a `subject_erased` fact (no personal data: the subject id, generations, who asked, counts). Follow it with `GET /v1/subjects/{subject}/erasure`. Idempotent: while an erasure of the subject runs, or once one has finished, the same erasure is answered and nothing is done again — unless the subject has sent personal data since the finished one (a new key generation): then a new erasure starts (a new id) and erases it. Events of the subject that arrive afterwards get a new key, or are refused (422 `subject_erased`) where FACTLINE_REFUSE_ERASED_SUBJECTS names the tenant.",
  scopes: ["admin"],
  errors: { 400: "`invalid_request`: the subject id is empty or longer than 256 characters", 409: "`conflict`: the tenant is being deleted", 503: "`unavailable`: the read database, the key store or the batch queue; retry" }
}))

export const getErasure = HttpApiEndpoint.get("getSubjectErasure", "/v1/subjects/:subject/erasure", {
  params: subjectParam,
  success: ErasureView,
  error: problems(400, 404, 503)
}).pipe(describe({
  summary: "A data subject's erasure",
  description: "The subject's latest erasure in the caller's tenant: its phase, the key generations destroyed, when the cleaning starts, what it removed per store and the audit fact; `failed` with its error (a new `POST …/erase` resumes it: every phase is idempotent).",
  scopes: ["admin"],
  errors: { 400: "`invalid_request`: the subject id is empty or too long", 404: "`not_found`: the subject was never erased", 503: "`unavailable`: the read database; retry" }
}))

export const exportSubject = HttpApiEndpoint.get("exportSubject", "/v1/subjects/:subject/export", {
  params: subjectParam,
  success: SubjectExportView,
  error: problems(400, 503)
}).pipe(describe({
  summary: "Export a data subject's data",
  description: "What the read side holds of the data subject in the caller's tenant, the access request's counterpart: its facts in the D1 facts copy (within the copy's window: FACTLINE_FACTS_WINDOW_DAYS), personal fields opened, and each projection's rows of it (by the projection's erasure subject column). Not covered: facts older than the window (in the ledger and the archive: read the streams), facts whose type declares no personal data, what webhook receivers hold, messages in flight. After an erasure, its personal fields read `[erased]`.",
  scopes: ["admin"],
  errors: { 400: "`invalid_request`: the subject id is empty or too long", 503: "`unavailable`: the read database or the key store; retry" }
}))

export const group = HttpApiGroup.make("subjects").add(erase).add(getErasure).add(exportSubject).middleware(Edge)
  .annotateMerge(OpenApi.annotations({ title: "Subjects", description: "A data subject's personal data: erasing it in one call, following the erasure, and exporting what the read side holds of it." }))
