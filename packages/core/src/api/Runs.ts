/**
 * The runs view (scope `admin` — a tenant's own runs only — or `platform`, every tenant's), core's `Runs`:
 *
 * - `GET /v1/runs?queue=&type=&outcome=&subject=&since=&cursor=&limit=` — each message's latest attempt
 *   (queue, type, subject, tenant, attempt, outcome, error, next retry, trace), the most recently updated first.
 * - `POST /v1/runs/:id/retry` — "retry now": a copy of a waiting message sent to its queue at once; a dead
 *   one is answered with a 409 naming its dead letter's filters (replay it there).
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { cursor, describe, limitParameter, nextCursor, oneOf, type PageLimit, problems, text, queueNames } from "./Contract.js"
import { Edge } from "./Edge.js"
/** A run's latest outcome (the runtime, core's `Runs`, reads them from here). */
export const outcomes = ["ok", "retry", "park", "dead", "rerun"] as const

/** A page of runs. */
export const listLimit: PageLimit = { maximum: 200, default: 50 }
const filters = {
  queue: oneOf(queueNames, "The queue the message is on"),
  type: text("Message type (`fact.<type>` or `facts.batch` on the fact queues)"),
  outcome: oneOf(outcomes, "The latest attempt's outcome"),
  subject: text("The message's subject"),
  since: text("Runs updated at or after this time (ISO-8601): what `factline runs --follow` polls with")
}
export const RunSchema = Schema.Struct({
  id: Schema.String,
  queue: Schema.String,
  message_id: Schema.String.annotate({ description: "The envelope's message_id (the queue's message id for a body without one)" }),
  tenant_id: Schema.NullOr(Schema.String),
  message_type: Schema.NullOr(Schema.String),
  subject: Schema.NullOr(Schema.String),
  idempotency_key: Schema.NullOr(Schema.String),
  trace_id: Schema.NullOr(Schema.String).annotate({ description: "The W3C trace id of the message (of its first fact on the fact queues)" }),
  attempt: Schema.Int.annotate({ description: "The queue's number of the latest attempt (a \"retry now\" copy starts at 1)" }),
  attempts: Schema.Int.annotate({ description: "Attempts recorded for this message, every delivery and copy together" }),
  outcome: Schema.Literals(outcomes).annotate({ description: "ok, retry (waiting for next_retry_at), park (held, sent again at next_retry_at), dead (dead-lettered), rerun (a \"retry now\" copy is on its way)" }),
  error: Schema.NullOr(Schema.String).annotate({ description: "The latest attempt's error (its first line)" }),
  next_retry_at: Schema.NullOr(Schema.String),
  first_attempted_at: Schema.String,
  updated_at: Schema.String,
  can_retry: Schema.Boolean.annotate({ description: "Whether POST /v1/runs/:id/retry can send it now" })
}).annotate({ identifier: "Run", description: "A queue message's attempts: the latest one's outcome" })
const id = { id: Schema.String.annotate({ description: "A run's id" }) }
const scopes = ["admin", "platform"] as const

export const listRuns = HttpApiEndpoint.get("listRuns", "/v1/runs", {
  query: { ...filters, cursor, limit: limitParameter(listLimit) },
  success: Schema.Struct({ data: Schema.Array(RunSchema), next_cursor: nextCursor, recording: Schema.Literals(["all", "failures", "none"]).annotate({ description: "Which attempts are recorded (`FACTLINE_RUNS`): failures (default) leaves out messages that succeed on their first delivery" }) }),
  error: problems(400, 503)
}).pipe(describe({
  summary: "List runs",
  description: "Every message attempt as it happens, the most recently updated first: its latest attempt, outcome, error and next retry. A tenant admin sees its own, the platform scope every tenant's. Kept 7 days, at most 100,000 runs.",
  scopes,
  errors: { 400: "`invalid_query`, naming the parameter (an unknown queue or outcome, a malformed time or cursor)", 503: "`unavailable`: the runs store; retry" }
}))

export const retryRun = HttpApiEndpoint.post("retryRun", "/v1/runs/:id/retry", { params: id, success: RunSchema.pipe(HttpApiSchema.status(202)), error: problems(404, 409, 503) })
  .pipe(describe({
    summary: "Retry a run now",
    description: "Sends a copy of the waiting message to its queue at once (its own delayed delivery still comes, and does nothing: idempotency keys and fact ids make the work happen once).",
    scopes,
    errors: {
      404: "`not_found`: no such run for this token",
      409: "`already_succeeded`; `dead_lettered` (replay its dead letter: the details name its queue, type and idempotency key); `not_kept` (its message was too large to keep); `conflict` (it succeeded or was dead-lettered meanwhile)",
      503: "`unavailable`: the runs store or the queue; retry"
    }
  }))

export const group = HttpApiGroup.make("runs").add(listRuns, retryRun).middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Runs",
    description: "Every queue message's attempts as they happen — outcome, error, next retry, trace — with \"retry now\"."
  }))
