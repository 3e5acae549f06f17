/**
 * Dead letters (scope `admin` — a tenant's own records only — or `platform`, every tenant's):
 * `GET /v1/dlq?queue=&status=&type=&reason=&cursor=&limit=`, `GET /v1/dlq/:id`,
 * `POST /v1/dlq/:id/replay`, `POST /v1/dlq/replay` (bulk, by the same filters),
 * `POST /v1/dlq/:id/skip {"reason"}` (appends a `reconciliation` fact), `POST /v1/dlq/:id/escalate {"note"?}`.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { cursor, deadLetterSources, describe, limitParameter, nextCursor, oneOf, type PageLimit, problems, text, required } from "./Contract.js"
import { Edge } from "./Edge.js"
/** A dead letter's status (the runtime, core's `DeadLetterStore`, reads them from here). */
export const statuses = ["open", "replaying", "replayed", "skipped", "escalated"] as const

/** A page of dead letters. */
export const listLimit: PageLimit = { maximum: 200, default: 50 }
const filters = {
  queue: oneOf(deadLetterSources, "The queue the message died on (`factline-workflows`: a workflow instance that failed for good)"),
  type: text("Message or fact type"),
  reason: text("Failure reason, e.g. permanent, retries_exhausted")
}
/** A dead letter as the list shows it (core's `DeadLetterStore` decodes its rows with it). */
export const DeadLetter = Schema.Struct({
  id: Schema.String,
  queue: Schema.String,
  status: Schema.Literals(statuses),
  reason: Schema.String.annotate({ description: "permanent_failure, retries_exhausted, defect, …" }),
  last_error: Schema.String,
  attempts: Schema.Int,
  tenant_id: Schema.NullOr(Schema.String),
  message_type: Schema.NullOr(Schema.String),
  idempotency_key: Schema.NullOr(Schema.String),
  subject: Schema.NullOr(Schema.String),
  first_attempted_at: Schema.String,
  last_attempted_at: Schema.String,
  received_at: Schema.String,
  resolved_by: Schema.NullOr(Schema.String),
  resolved_at: Schema.NullOr(Schema.String),
  replay_operation_id: Schema.NullOr(Schema.String)
}).annotate({ identifier: "DeadLetter", description: "A message that failed for good" })
const DeadLetterDetail = Schema.Struct({
  ...DeadLetter.fields,
  stack: Schema.NullOr(Schema.String).annotate({ description: "Reason `defect`: the stack of the throw or die in product code (null for any other failure)" }),
  original_message: Schema.Unknown.annotate({ description: "The message as it was on the queue" }),
  history: Schema.Array(Schema.Struct({ at: Schema.String, action: Schema.String, by: Schema.String, note: Schema.optional(Schema.String), operation_id: Schema.optional(Schema.String) }))
}).annotate({ identifier: "DeadLetterDetail", description: "A dead letter with its original message and its history (who replayed, skipped or escalated it, when)" })
const id = { id: Schema.String.annotate({ description: "A dead letter's id" }) }
const scopes = ["admin", "platform"] as const
const errors = { 400: "`invalid_query` / `invalid_request`, naming the field", 404: "`not_found`: no such record for this token", 409: "`conflict`: already replayed, skipped or being replayed (naming who and when)", 503: "`unavailable`: the store or the source queue; retry" }

export const listDeadLetters = HttpApiEndpoint.get("listDeadLetters", "/v1/dlq", {
  query: { ...filters, status: oneOf(statuses, "default open"), cursor, limit: limitParameter(listLimit) },
  success: Schema.Struct({
    data: Schema.Array(DeadLetter),
    next_cursor: nextCursor,
    spilled: Schema.optionalKey(Schema.NullOr(Schema.Int)).annotate({
      description: "The platform scope only: dead letters spilled to R2 during a D1 outage, not in this list until the cron moves them in (counted up to 10,000; null: R2 could not say)"
    })
  }),
  error: problems(400, 503)
}).pipe(describe({ summary: "List dead letters", description: "Newest first; a tenant admin sees its own, the platform scope every tenant's (and how many are spilled to R2, waiting to be moved in).", scopes, errors: { 400: errors[400], 503: errors[503] } }))

export const replayMatching = HttpApiEndpoint.post("replayDeadLetters", "/v1/dlq/replay", {
  query: filters,
  success: Schema.Struct({ operation_id: Schema.String, count: Schema.Int, waves: Schema.Int, wave_size: Schema.Int, wave_delay_seconds: Schema.Int }).pipe(HttpApiSchema.status(202)),
  error: problems(400, 503)
}).pipe(describe({ summary: "Replay matching dead letters", description: "Up to 1,000 open records matching the filters, in waves of 100 with staggered delays; each is claimed first, so a record is replayed once.", scopes, errors: { 400: errors[400], 503: errors[503] } }))

export const getDeadLetter = HttpApiEndpoint.get("getDeadLetter", "/v1/dlq/:id", { params: id, success: DeadLetterDetail, error: problems(404, 503) })
  .pipe(describe({ summary: "Get a dead letter", description: "With the original message, the failure context and the history.", scopes, errors: { 404: errors[404], 503: errors[503] } }))

export const replayOne = HttpApiEndpoint.post("replayDeadLetter", "/v1/dlq/:id/replay", { params: id, success: DeadLetterDetail.pipe(HttpApiSchema.status(202)), error: problems(404, 409, 503) })
  .pipe(describe({ summary: "Replay a dead letter", description: "Sends the same body again (same idempotency key): work already done is not done twice.", scopes, errors: { 404: errors[404], 409: errors[409], 503: errors[503] } }))

export const skip = HttpApiEndpoint.post("skipDeadLetter", "/v1/dlq/:id/skip", {
  params: id,
  payload: Schema.Struct({
    reason: Schema.String.check(Schema.isPattern(/\S/, { message: "is required: why this work is given up" }), Schema.isMaxLength(1_000)).annotate({ description: "Why the work is given up (1 to 1,000 characters, not blank)" })
  }),
  success: Schema.Struct({ ...DeadLetterDetail.fields, reconciliation_fact_id: Schema.String }),
  error: problems(400, 404, 409, 415, 503)
}).pipe(describe({ summary: "Skip a dead letter", description: "Gives the work up and appends a `reconciliation` fact naming who and why to the original stream.", scopes, usage: 'send { "reason": "why this work is given up" }', errors: { ...errors, 415: "`unsupported_media_type`" } }))

export const escalate = HttpApiEndpoint.post("escalateDeadLetter", "/v1/dlq/:id/escalate", {
  params: id,
  payload: Schema.Struct({ note: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(1_000))).annotate({ description: "For whoever takes it over (at most 1,000 characters); the body may be left out" }) }),
  success: DeadLetterDetail,
  error: problems(400, 404, 409, 415, 503)
}).pipe(describe({ summary: "Escalate a dead letter", scopes, optionalBody: true, usage: 'send { "note"?: "for whoever takes it over" }, or no body', errors: { ...errors, 415: "`unsupported_media_type`" } }))

export const group = HttpApiGroup.make("deadLetters").add(listDeadLetters, replayMatching, getDeadLetter, replayOne, skip, escalate).middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Dead letters",
    description: "Messages that failed for good, with their failure context: replay (once), skip (with a reconciliation fact) or escalate."
  }))
