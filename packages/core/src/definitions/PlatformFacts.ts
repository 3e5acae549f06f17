/**
 * Facts the platform itself appends (module `factline`): webhook delivery
 * outcomes and endpoint changes, operators' reconciliations, data subjects' erasures, and timers. Their types are reserved — no product module
 * may emit them — and product modules may listen to them (a projection of
 * deliveries, a processor that alerts on `webhook_endpoint_disabled`).
 */
import * as Schema from "effect/Schema"
import * as FactDefinition from "./FactDefinition.js"

export const moduleName = "factline"

const Delivery = {
  delivery_id: Schema.String,
  endpoint_id: Schema.String,
  event_type: Schema.String,
  attempt: Schema.Int
}

/** A delivery an endpoint accepted (2xx). `causation_id` is the fact that triggered it. */
export const WebhookSent = FactDefinition.make("webhook_sent", Schema.Struct({ ...Delivery, status_code: Schema.Int, duration_ms: Schema.Int }))

/** A delivery that will not be retried any more (retries exhausted, or the endpoint gone). */
export const WebhookFailed = FactDefinition.make(
  "webhook_failed",
  Schema.Struct({ ...Delivery, status_code: Schema.NullOr(Schema.Int), error: Schema.String })
)

/** An endpoint the platform disabled: `410 Gone`, or failing every delivery for too long. */
export const WebhookEndpointDisabled = FactDefinition.make(
  "webhook_endpoint_disabled",
  Schema.Struct({ endpoint_id: Schema.String, reason: Schema.String, url_host: Schema.String })
)

/**
 * An operator's decision about a dead letter that will not be replayed (`POST /v1/dlq/:id/skip`): what was
 * given up, why, and by whom — so the ledger, not only the DLQ table, says the work was dropped on purpose.
 */
export const Reconciliation = FactDefinition.make(
  "reconciliation",
  Schema.Struct({
    action: Schema.Literal("dead_letter_skipped"),
    dead_letter_id: Schema.String,
    queue: Schema.String,
    failure_reason: Schema.String,
    idempotency_key: Schema.NullOr(Schema.String),
    message_type: Schema.NullOr(Schema.String),
    note: Schema.String,
    by: Schema.String
  })
)

/**
 * A data subject's personal data erased (`POST /v1/subjects/:subject/erase`, subjects/Erasure.ts), appended to the
 * tenant's stream `factline/erasures` when the erasure has finished: what was erased, when, at whose request, and
 * what was removed (counts per store). It holds no personal data: the subject id is pseudonymous, by rule.
 */
export const SubjectErased = FactDefinition.make(
  "subject_erased",
  Schema.Struct({
    erasure_id: Schema.String,
    subject: Schema.String,
    generations: Schema.Array(Schema.Int),
    requested_by: Schema.String,
    requested_at: Schema.String,
    keys_erased_at: Schema.String,
    removed: Schema.Record(Schema.String, Schema.Record(Schema.String, Schema.Int))
  })
)

// --- timers (Timer.ts): what a handler or processor asked for, recorded in its stream ---

/**
 * A timer scheduled in this stream (`Timer.schedule`): at or after `fire_at` the ledger shard appends `fact`
 * to the stream, once. Its fact id is the timer's id. A later schedule with the same `name` replaces it.
 */
export const TimerScheduled = FactDefinition.make(
  "timer_scheduled",
  Schema.Struct({
    name: Schema.String,
    fire_at: Schema.String,
    fact: Schema.Struct({ type: Schema.String, data: Schema.Record(Schema.String, Schema.Unknown), schema_version: Schema.optional(Schema.Int) })
  })
)

/** The stream's pending timer `name` will not fire (`Timer.cancel`); nothing happens if none is pending. */
export const TimerCancelled = FactDefinition.make("timer_cancelled", Schema.Struct({ name: Schema.String }))

export const all: ReadonlyArray<FactDefinition.Any> = [WebhookSent, WebhookFailed, WebhookEndpointDisabled, Reconciliation, SubjectErased, TimerScheduled, TimerCancelled]
