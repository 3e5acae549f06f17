/**
 * `POST /v1/recover` `{ since, dry_run?, cursor? }` (scope `platform`: it walks every tenant's ledger shards) —
 * core's `Recovery`: the facts appended since `since` are relayed again to their queues, and the accepted
 * events kept in development (`FACTLINE_KEEP_ACCEPTED`) that have no fact yet are sent again. What a restart
 * of `wrangler dev` loses (docs/reliability.md); `factline recover --since 10m` calls it until `next_cursor`
 * is null, and `npm run dev` calls it with `dry_run` at start to say how many facts it may concern.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as OpenApi from "effect/http-api/OpenApi"
import { IsoDateTime } from "@factline/schemas"
import { cursor, describe, problems } from "./Contract.js"
import { Edge } from "./Edge.js"

const EventsReport = Schema.NullOr(Schema.Struct({
  kept: Schema.Int.annotate({ description: "Events kept (FACTLINE_KEEP_ACCEPTED) and accepted since `since`" }),
  decided: Schema.Int.annotate({ description: "Of those, events whose stream holds a fact caused by their idempotency key, or that were dead-lettered (a record open, skipped or escalated: the operator's): nothing to do" }),
  dead_lettered: Schema.Int.annotate({ description: "Of the decided, the events dead-lettered with no fact: never sent again by recovery (replay the dead letter instead)" }),
  resent: Schema.Int.annotate({ description: "Sent again to the events queue with their idempotency key (dry run: would be)" })
})).annotate({ description: "Null when accepted events are not kept (the default outside development) or on a call with a cursor (the first call does them)" })

export const recover = HttpApiEndpoint.post("recover", "/v1/recover", {
  payload: Schema.Struct({
    since: IsoDateTime.annotate({ description: "ISO 8601 date-time (a real one: 2026-02-30 is refused): facts appended (and events accepted) since then" }),
    dry_run: Schema.optionalKey(Schema.Boolean).annotate({ description: "Count only; send nothing" }),
    cursor: Schema.optionalKey(Schema.String).annotate({ description: "`next_cursor` of the previous call (opaque)" })
  }),
  success: Schema.Struct({
    since: Schema.String,
    dry_run: Schema.Boolean,
    facts: Schema.Int.annotate({ description: "Facts appended since `since` in the shards this call walked" }),
    relayed: Schema.Int.annotate({ description: "(fact, destination queue) pairs sent again (dry run: would be)" }),
    sends: Schema.Int.annotate({ description: "`sendBatch` calls made" }),
    handed_over: Schema.Int.annotate({ description: "Facts whose send failed, handed to their shard's outbox (relayed by its alarm)" }),
    shards: Schema.Int.annotate({ description: "Ledger shards walked to their end by this call" }),
    events: EventsReport,
    next_cursor: Schema.NullOr(Schema.String).annotate({ description: "Call again with it to go on; null: done" })
  }),
  error: problems(400, 415, 503)
}).pipe(describe({
  summary: "Recover what the queues lost",
  description: "Relays every fact appended since `since` again to its queues (fact-processing, projections, webhooks) — idempotent: every consumer dedupes by fact id — and, where accepted events are kept (`FACTLINE_KEEP_ACCEPTED`, development), sends again those with no fact yet. For a restart of the local queues (`wrangler dev` keeps nothing queued). A bounded amount per call: repeat with `next_cursor` until it is null.",
  scopes: ["platform"],
  usage: 'send { "since": "<ISO 8601 time>", "dry_run"?: true, "cursor"?: "<next_cursor>" }',
  errors: { 400: "`invalid_request`: `since` not an ISO 8601 time, an unknown field, a malformed cursor", 415: "`unsupported_media_type`", 503: "`unavailable`: the ledger, a queue or R2; run it again (it is idempotent)" }
}))

export const group = HttpApiGroup.make("recovery").add(recover).middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Recovery",
    description: "Re-relaying what the queues lost: a restart of the local queues, or any outage that dropped messages."
  }))
