/**
 * Workflow instances, for operators (scope `admin` — a tenant's own instances only — or `platform`, every
 * tenant's), core's `workflows/Operations.ts` over the `workflow_instances` index and Cloudflare's binding:
 *
 * - `GET /v1/workflows?workflow=&status=&subject=&cursor=&limit=` — instances, the most recently updated first.
 * - `GET /v1/workflows/:id` — one instance: its row joined with Cloudflare's own status (status, error,
 *   output) and the facts it appended.
 * - `POST /v1/workflows/:id/terminate` — stops it (Cloudflare's `terminate()`); recorded `terminated`.
 * - `POST /v1/workflows/:id/retry` — runs it again from its start (Cloudflare's `restart()`; not a complete one): every step runs again, each with
 *   its own idempotency key, so an external call or an append already done is not done twice.
 *
 * Another tenant's instance is a 404, as an unknown one is.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { cursor, describe, limitParameter, nextCursor, oneOf, type PageLimit, problems, text } from "./Contract.js"
import { Edge } from "./Edge.js"
import { ListedFact } from "./Facts.js"

/** Where an instance stands, as the platform records it (the runtime, core's `WorkflowRecords`, reads them from here). */
export const statuses = ["queued", "running", "sleeping", "waiting", "compensating", "complete", "failed", "terminated"] as const

/** A page of instances. */
export const listLimit: PageLimit = { maximum: 200, default: 50 }
/** The appended facts `GET /v1/workflows/:id` reads from the ledger (the ids of every one are in `facts`). */
export const shownFacts = 50

export const InstanceSchema = Schema.Struct({
  instance_id: Schema.String.annotate({ description: "Cloudflare's instance id: `<workflow>-<32 hex>`, one per tenant, workflow and subject" }),
  tenant_id: Schema.String,
  workflow: Schema.String,
  subject: Schema.String.annotate({ description: "The stream of the fact that started it (and of the facts it appends)" }),
  start_fact_id: Schema.String,
  status: Schema.Literals(statuses).annotate({ description: "queued (started, not yet run), running, sleeping (until wait_until), waiting (for waiting_for, until wait_until), compensating, complete, failed (error says why), terminated (by an operator)" }),
  step: Schema.NullOr(Schema.String).annotate({ description: "The step it is on (or ended on): `<activity>`, `append/<name>`, `wait/<name>`, `emit/<name>`, `sleep/<name>`" }),
  attempts: Schema.Int.annotate({ description: "Attempts of the current step" }),
  waiting_for: Schema.NullOr(Schema.String).annotate({ description: "The wait and the fact types it waits for, while waiting" }),
  wait_until: Schema.NullOr(Schema.String).annotate({ description: "When its sleep or wait ends (a wait then times out)" }),
  facts: Schema.Array(Schema.String).annotate({ description: "The ids of the facts it appended" }),
  error: Schema.NullOr(Schema.String),
  traceparent: Schema.NullOr(Schema.String).annotate({ description: "The W3C trace context of the fact that started it" }),
  started_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "WorkflowInstance", description: "A workflow instance as the platform records it" })

export const CloudflareStatus = Schema.Struct({
  status: Schema.String.annotate({ description: "Cloudflare's status: queued, running, paused, waiting, errored, terminated, complete, unknown" }),
  error: Schema.NullOr(Schema.String).annotate({ description: "The error it ended with (errored)" }),
  output: Schema.optionalKey(Schema.Unknown).annotate({ description: "What its run returned (complete)" })
}).annotate({ identifier: "WorkflowCloudflareStatus", description: "What Cloudflare's binding says of the instance" })

export const InstanceDetail = Schema.Struct({
  ...InstanceSchema.fields,
  cloudflare: Schema.NullOr(CloudflareStatus).annotate({ description: "Cloudflare's own status; null when Cloudflare does not know the instance (not created yet, or gone)" }),
  appended: Schema.Array(ListedFact).annotate({ description: `The facts it appended, read from the ledger, in stream order (the first ${shownFacts}; every id is in \`facts\`)` })
}).annotate({ identifier: "WorkflowInstanceDetail", description: "A workflow instance with Cloudflare's status and the facts it appended" })

const id = { id: Schema.String.annotate({ description: "The instance id" }) }
const scopes = ["admin", "platform"] as const

export const listWorkflows = HttpApiEndpoint.get("listWorkflows", "/v1/workflows", {
  query: {
    workflow: text("Only instances of this workflow"),
    status: oneOf(statuses, "Only instances in this status"),
    subject: text("Only the instance of this subject (the start fact's stream)"),
    cursor,
    limit: limitParameter(listLimit)
  },
  success: Schema.Struct({ data: Schema.Array(InstanceSchema), next_cursor: nextCursor }),
  error: problems(400, 503)
}).pipe(describe({
  summary: "List workflow instances",
  description: "The most recently updated first: status, current step and its attempts, what it waits for and until when, the facts it appended. A tenant admin sees its own, the platform scope every tenant's.",
  scopes,
  errors: { 400: "`invalid_query`, naming the parameter (an unknown status, a malformed cursor or limit)", 503: "`unavailable`: the instances index; retry" }
}))

export const getWorkflow = HttpApiEndpoint.get("getWorkflow", "/v1/workflows/:id", { params: id, success: InstanceDetail, error: problems(404, 503) })
  .pipe(describe({
    summary: "Show a workflow instance",
    description: "Its row joined with Cloudflare's own status (status, error, output) and the facts it appended.",
    scopes,
    errors: { 404: "`not_found`: no such instance for this token", 503: "`unavailable`: the instances index, Cloudflare's binding or the ledger; retry" }
  }))

export const terminateWorkflow = HttpApiEndpoint.post("terminateWorkflow", "/v1/workflows/:id/terminate", { params: id, success: InstanceDetail, error: problems(404, 409, 503) })
  .pipe(describe({
    summary: "Terminate a workflow instance",
    description: "Stops it where it is (Cloudflare's `terminate()`): no further step runs, no compensation. Recorded `terminated`; `retry` runs it again.",
    scopes: ["admin", "platform"],
    errors: {
      404: "`not_found`: no such instance for this token, or Cloudflare does not know it",
      409: "`workflow_refused`: Cloudflare refused (`instance.cannot_terminate`: it has already ended)",
      503: "`unavailable`: the instances index or Cloudflare's binding; retry"
    }
  }))

export const retryWorkflow = HttpApiEndpoint.post("retryWorkflow", "/v1/workflows/:id/retry", { params: id, success: InstanceDetail.pipe(HttpApiSchema.status(202)), error: problems(404, 409, 503) })
  .pipe(describe({
    summary: "Retry a workflow instance",
    description: "Runs the instance again from its start (Cloudflare's `restart()`): a failed or terminated one, or one that is stuck. Each step runs again with its own idempotency key: an external call, an append or an emit already done is not done twice. Recorded `queued` until it runs.",
    scopes: ["admin", "platform"],
    errors: {
      404: "`not_found`: no such instance for this token, or Cloudflare does not know it",
      409: "`workflow_complete`: it completed, nothing to retry; `workflow_refused`: Cloudflare refused (`instance.cannot_restart`)",
      503: "`unavailable`: the instances index or Cloudflare's binding; retry"
    }
  }))

export const group = HttpApiGroup.make("workflows").add(listWorkflows, getWorkflow, terminateWorkflow, retryWorkflow).middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Workflows",
    description: "Workflow instances (Cloudflare Workflows): where each stands — step, attempts, what it waits for and until when, the facts it appended — with terminate and retry."
  }))
