/**
 * `GET /v1/queues/health?window=1h` (scope `platform`: the queues are shared by every tenant): the five
 * queues graded against their thresholds — throughput, retries, dead letters, depth, backlog age, lag — the
 * ledger's relay backlog, and the dead letters spilled to R2 during a D1 outage that the cron has not moved back yet.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as OpenApi from "effect/http-api/OpenApi"
import { describe, Json, oneOf, problems } from "./Contract.js"
import { Edge } from "./Edge.js"

export const windows: Record<string, number> = { "15m": 15, "1h": 60, "6h": 360, "24h": 1_440 }
const Status = Schema.Literals(["ok", "warning", "critical"])
const Latency = Schema.NullOr(Schema.Number).annotate({ description: "ms, a histogram bucket's upper bound (past the last finite bound — 12 h for lag, 15 min for processing — that bound); null without samples" })
/** One queue over the window (Metrics.QueueHealth); open, so that a counter added later is no breaking change. */
const QueueHealth = Schema.StructWithRest(Schema.Struct({
  queue: Schema.String,
  status: Status,
  received: Schema.Int,
  acked: Schema.Int,
  retried: Schema.Int,
  dead_lettered: Schema.Int,
  dead_lettered_by_reason: Schema.Record(Schema.String, Schema.Int).annotate({ description: "`dlq_total{queue, reason}`: messages dead-lettered in the window, by failure reason" }),
  sent: Schema.Int.annotate({ description: "`messages_sent_total{queue}`: messages sent to the queue in the window" }),
  retry_rate: Schema.Number.annotate({ description: "retried / received, 0 to 1" }),
  dlq_open: Schema.Int.annotate({ description: "Open dead letters" }),
  dlq_by_reason: Schema.Record(Schema.String, Schema.Int).annotate({ description: "Dead-letter records received in the window (any status), by failure reason" }),
  depth: Schema.NullOr(Schema.Number).annotate({ description: "Messages accepted and not yet consumed (the queue's backlog now, else the last one a batch reported); a grouped queue's is the sum over its group queues; null where neither is known" }),
  backlog_age_ms: Schema.NullOr(Schema.Number).annotate({ description: "How long the oldest message still on the queue (any of its group queues) has waited, graded against `retention_seconds` (half: warning, three quarters: critical); null where the queue does not say" }),
  retention_seconds: Schema.Int.annotate({ description: "The queue's message retention (what `factline deploy` creates it with)" }),
  groups: Schema.optional(Schema.Array(Schema.Struct({
    queue: Schema.String,
    group: Schema.Int,
    depth: Schema.NullOr(Schema.Number),
    backlog_age_ms: Schema.NullOr(Schema.Number)
  }))).annotate({ description: "A grouped queue's group queues (factline-events-0 …), each with its own backlog; absent for an ungrouped queue" }),
  dead_letter_sent: Schema.Int.annotate({ description: "`messages_sent_total{queue=<its DLQ>}`: messages dead-lettered to its DLQ in the window" }),
  batch_size_buckets: Schema.Record(Schema.String, Schema.Int).annotate({ description: "`queue_batch_size`: consumer batches in the window by size (keys are upper bounds, `+Inf` the open bucket; not cumulative)" }),
  batch_size_p50: Schema.NullOr(Schema.Number).annotate({ description: "Batch size p50, as its bucket's upper bound; null without batches" }),
  batch_size_p99: Schema.NullOr(Schema.Number),
  batch_size_max: Schema.Int,
  lag_p50_ms: Latency,
  lag_p99_ms: Latency,
  processing_p99_ms: Latency,
  batches: Schema.Int,
  checks: Schema.Record(Schema.String, Status).annotate({ description: "Each graded check (dlq_open, depth, processing_p99_ms, retry_rate, backlog_age_ms)" }),
  series: Schema.Array(Schema.Struct({
    minute: Schema.String,
    sent: Schema.Int,
    received: Schema.Int,
    lag_p99_ms: Latency,
    depth: Schema.NullOr(Schema.Int).annotate({ description: "The deepest backlog a batch of the minute was delivered with; null: none recorded" })
  })).annotate({ description: "Per minute, oldest first" })
}), [Json])

export const health = HttpApiEndpoint.get("queueHealth", "/v1/queues/health", {
  query: { window: oneOf(["15m", "1h", "6h", "24h"], "default 1h") },
  success: Schema.Struct({
    window: Schema.String,
    since: Schema.String,
    status: Status,
    thresholds: Json,
    queues: Schema.Array(QueueHealth).annotate({
      description: "Per queue: received, acked, retried, dead-lettered, retry rate, open dead letters by reason, depth, lag p50/p99, processing p99, a per-minute series"
    }),
    ledger: Schema.Struct({ relay_pending_shards: Schema.Int }),
    spilled_dead_letters: Schema.NullOr(Schema.Int).annotate({
      description: "Dead letters the DLQ consumers could not store in D1 and spilled to R2; the cron moves them into the dead-letter list. Above 0 the status is at least warning. Counted up to 10,000; null: R2 could not say"
    })
  }),
  error: problems(400, 503)
}).pipe(describe({ summary: "Queue health", scopes: ["platform"], errors: { 400: "`invalid_query`: an unknown window", 503: "`unavailable`: the metrics store; retry" } }))

export const group = HttpApiGroup.make("queues").add(health).middleware(Edge)
  .annotateMerge(OpenApi.annotations({
    title: "Queues",
    description: "The platform's queues graded against their thresholds."
  }))
