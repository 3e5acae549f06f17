/**
 * The ledger's facts over HTTP, within the token's tenant: a stream's facts in order, the tenant's facts
 * filtered by subject and type, and the causation chain of one fact. Streams and the facts list answer
 * CloudEvents batches when asked (`Accept: application/cloudevents-batch+json`).
 *
 * One stream's facts (`/v1/streams/:subject/facts`, `/v1/facts?subject=`, a trace) are read from the ledger;
 * only the listing across streams (`/v1/facts` without a subject) reads the D1 `facts` copy, and only for
 * the fact types the copy holds (`FACTLINE_FACTS_COPY`): any other listing is refused, naming the setting,
 * rather than answered with a page that silently misses facts.
 *
 * Every fact is answered in its type's latest shape (`schema_version` the latest; older facts upcast
 * through the definitions' upcasters), as the typed client's types say; a fact stored by code newer than
 * this deployment is answered as stored, its `schema_version` saying so, never reshaped by a guess.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as OpenApi from "effect/http-api/OpenApi"
import { Fact } from "@factline/schemas"
import { cursor, describe, limitParameter, nextCursor, type PageLimit, problems, text } from "./Contract.js"
import { Edge } from "./Edge.js"
import * as Projections from "./Projections.js"

const StoredFact = Fact.annotate({ identifier: "Fact", description: "An immutable fact of the ledger" })
const cloudEvents = { 200: { ["application/cloudevents-batch+json"]: { description: "With `Accept: application/cloudevents-batch+json`: the same facts as CloudEvents 1.0 (`id` = fact_id, `source` = /factline/tenants/<tenant>/streams/<stream>, percent-encoded, `type` = fact type, `subject` = stream, `time` = created_at, `datacontenttype` application/json, `data`; string extensions `sequence` (zero-padded to 20 digits), `causationid`, `correlationid`, `causedby`, `tenantid`, `schemaversion` (of `data`: the latest the platform knows), and `traceparent` when the fact has one); the next page in a `Link: <…>; rel=\"next\"` header" } } }

/** A page of one stream's facts. */
export const streamLimit: PageLimit = { maximum: 1_000, default: 100 }

const notAcceptable = "`not_acceptable`: `Accept` refuses both application/json and application/cloudevents-batch+json"

export const readStream = HttpApiEndpoint.get("readStream", "/v1/streams/:subject/facts", {
  params: { subject: Schema.String.annotate({ description: "The stream: an envelope's `subject`" }) },
  query: {
    // A sequence the ledger can hold (at most 2^53 - 1): checked first, so the pattern carries the description.
    after: Schema.optionalKey(Schema.String.check(
      Schema.makeFilter((value: string) => !/^\d+$/u.test(value) || Number(value) <= Number.MAX_SAFE_INTEGER, { message: `must be at most ${Number.MAX_SAFE_INTEGER}` }),
      Schema.isPattern(/^\d+$/u, { message: "must be a whole number" })
    )).annotate({ description: "Return facts after this sequence (default 0: from the start)" }),
    limit: limitParameter(streamLimit)
  },
  success: Schema.Struct({
    subject: Schema.String,
    version: Schema.Int.annotate({ description: "The stream's last sequence" }),
    facts: Schema.Array(StoredFact),
    next_after: Schema.NullOr(Schema.Int).annotate({ description: "Pass as `after` for the next page; null on the last" })
  }),
  error: problems(400, 404, 406, 503)
}).pipe(describe({
  summary: "Read a stream's facts",
  description: "In stream order (by `sequence`), a page at a time: pass `next_after` as `after` for the next.",
  scopes: ["read"],
  errors: { 400: "`invalid_query`: `after` or `limit` out of range", 404: "`not_found`: no such stream for this tenant", 406: notAcceptable, 503: "`unavailable`: the ledger; retry" },
  alsoAnswers: cloudEvents
}))

export const ListedFact = Schema.Struct({
  fact_id: Schema.String,
  subject: Schema.String,
  sequence: Schema.Int,
  type: Schema.String,
  causation_id: Schema.String,
  correlation_id: Schema.String,
  caused_by: Schema.String,
  created_at: Schema.String,
  traceparent: Schema.NullOr(Schema.String).annotate({ description: "W3C trace context of the fact; null for facts stored before it" }),
  schema_version: Schema.Int.annotate({ description: "The version of the fact type's schema `data` is in: the latest this platform knows (older facts are upcast)" }),
  data: Schema.Record(Schema.String, Schema.Unknown)
}).annotate({ identifier: "ListedFact" })
export type ListedFact = typeof ListedFact.Type

/** An optional query parameter that, when given, must not be empty (checked before the handler runs). */
const optionalNonEmpty = (description: string) =>
  Schema.optionalKey(Schema.String.check(Schema.isMinLength(1, { message: "must not be empty" }))).annotate({ description })

/** Ledger reads one `GET /v1/facts?subject=…&type=…` page may take at most, and the facts each reads. */
export const streamListingReads = 4
export const streamListingPage = 1_000

export const listFacts = HttpApiEndpoint.get("listFacts", "/v1/facts", {
  query: {
    subject: optionalNonEmpty("Only this stream's facts (read from the ledger, in stream order)"),
    type: text("Only facts of this type"),
    cursor,
    limit: limitParameter(Projections.pageLimit)
  },
  success: Schema.Struct({ data: Schema.Array(ListedFact), next_cursor: nextCursor }),
  error: problems(400, 406, 409, 503)
}).pipe(describe({
  summary: "List the tenant's facts",
  description: "With `subject`: that stream's facts from the ledger, in stream order (by `sequence`), optionally of one `type`; " +
    `a page reads at most ${streamListingReads * streamListingPage} facts of the stream, so with \`type\` it may hold fewer than \`limit\` (even none) and still have a \`next_cursor\`. ` +
    "Without `subject`: oldest first (by `created_at`, then `fact_id`) from the D1 facts copy, which holds the fact types the platform's `FACTLINE_FACTS_COPY` setting names " +
    "(`none` by default, `all`, or a list of types); a listing the copy cannot answer completely is a 409. " +
    "Keyset-paged either way: pass `next_cursor` as `cursor` for the next page (a cursor belongs to the kind of listing that gave it).",
  scopes: ["read"],
  errors: {
    400: "`invalid_query`: an unknown parameter, a bad cursor or limit",
    406: notAcceptable,
    409: "`facts_not_copied`: no `subject`, and the D1 facts copy does not hold the facts asked for (`FACTLINE_FACTS_COPY`: none, or a list without that type; without `type`, anything but all)",
    503: "`unavailable`: the ledger or the facts store; retry"
  },
  alsoAnswers: cloudEvents
}))

const TracedFact = Schema.Struct({ ...StoredFact.fields, depth: Schema.Int.annotate({ description: "How many causation hops from the traced fact" }) })

export const traceFact = HttpApiEndpoint.get("traceFact", "/v1/facts/:fact_id/trace", {
  params: { fact_id: Schema.String },
  query: { subject: optionalNonEmpty("The stream that holds the fact, if known (saves looking the fact up on every ledger shard of the tenant)") },
  success: Schema.Struct({
    fact_id: Schema.String,
    subject: Schema.String,
    correlation_id: Schema.String,
    traceparent: Schema.NullOr(Schema.String).annotate({ description: "The traced fact's W3C trace context (every fact of `back` and `forward` carries its own)" }),
    cause: Schema.Struct({
      idempotency_key: Schema.String.annotate({ description: "The message that started the chain" }),
      message: Schema.NullOr(Schema.Struct({ message_type: Schema.String, subject: Schema.String, accepted_at: Schema.String }))
    }),
    back: Schema.Array(StoredFact).annotate({ description: "From the first fact of the chain to the traced one" }),
    forward: Schema.Array(TracedFact).annotate({ description: "Everything the traced fact caused, breadth first" })
  }),
  error: problems(400, 404, 503)
}).pipe(describe({
  summary: "Trace a fact's causation chain",
  description: "Back to the message that caused it (with its accepted idempotency key), forward to every fact it caused, from the ledger's `causation_id`s. " +
    "The fact id alone is enough: without `subject`, each of the tenant's ledger shards looks the id up in its index (in parallel) to find the stream.",
  scopes: ["read"],
  errors: { 400: "`invalid_query`: an unknown or empty parameter", 404: "`not_found`: no such fact for this tenant (in that stream, when `subject` is given)", 503: "`unavailable`: the ledger; retry" }
}))

export const group = HttpApiGroup.make("facts").add(readStream, listFacts, traceFact).middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Facts",
    description: "The ledger's immutable facts: a stream in order, the tenant's facts filtered, a fact's causation chain. CloudEvents on request."
  }))
