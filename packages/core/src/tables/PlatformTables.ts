/**
 * The platform's D1 tables, as Drizzle schema. drizzle-kit generates the
 * migrations in `migrations/` from this file; analysts can import it to query
 * D1 with Drizzle. Runtime code uses bound SQL shaped by these definitions.
 */
import { sql } from "drizzle-orm"
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"

/** What each consumer has done, by tenant-qualified idempotency key. Kept ≥ 30 days. */
export const inbox = sqliteTable(
  "inbox",
  {
    queue: text("queue").notNull(),
    idempotencyKey: text("idempotency_key").notNull(),
    status: text("status", { enum: ["processing", "succeeded", "failed"] }).notNull(),
    attempts: integer("attempts").notNull().default(0),
    lastError: text("last_error"),
    firstSeenAt: text("first_seen_at").notNull(),
    updatedAt: text("updated_at").notNull()
  },
  (t) => [primaryKey({ columns: [t.queue, t.idempotencyKey] }), index("inbox_by_updated_at").on(t.updatedAt)]
)

/**
 * When a queue message was first attempted, for the messages whose first attempt ended in a retry: a
 * message's later attempts cannot carry it (`retry()` redelivers the body unchanged), and its dead letter
 * records it as `first_attempted_at`. Written and read only by `consuming/FirstAttempts.ts`; pruned after
 * the longest a queue keeps a message (14 days).
 */
export const firstAttempts = sqliteTable(
  "first_attempts",
  {
    queue: text("queue").notNull(),
    messageId: text("message_id").notNull(),
    firstAttemptedAt: text("first_attempted_at").notNull()
  },
  (t) => [primaryKey({ columns: [t.queue, t.messageId] }), index("first_attempts_by_first_attempted_at").on(t.firstAttemptedAt)]
)

/**
 * Dead-lettered messages with their failure context, as persisted by the DLQ
 * consumers, and what operators did about them: `status` goes
 * `open → replaying → replayed`, or `open → skipped | escalated`, with who
 * (`resolved_by`, the token's name) and when; `history` keeps every action
 * (JSON array). `subject` is the original message's, for the reconciliation
 * fact a skip appends. `alert_id` is the `factline.dead_letter.opened` alert
 * that counted the record (operations/Alerts.ts claims it, once): null until
 * an alert has.
 */
export const deadMessages = sqliteTable(
  "dead_messages",
  {
    id: text("id").primaryKey(),
    queue: text("queue").notNull(),
    reason: text("reason").notNull(),
    lastError: text("last_error").notNull(),
    attempts: integer("attempts").notNull(),
    firstAttemptedAt: text("first_attempted_at").notNull(),
    lastAttemptedAt: text("last_attempted_at").notNull(),
    tenantId: text("tenant_id"),
    messageType: text("message_type"),
    idempotencyKey: text("idempotency_key"),
    subject: text("subject"),
    originalMessage: text("original_message").notNull(),
    status: text("status", { enum: ["open", "replaying", "replayed", "skipped", "escalated"] }).notNull().default("open"),
    receivedAt: text("received_at").notNull(),
    resolvedBy: text("resolved_by"),
    resolvedAt: text("resolved_at"),
    replayOperationId: text("replay_operation_id"),
    history: text("history").notNull().default("[]"),
    alertId: text("alert_id"),
    /** A defect's stack (reason `defect`): where product code threw; null for every other failure. */
    stack: text("stack"),
    /** The data subject of the message's personal data (pseudonymous, plaintext), for its erasure: null when it has none. */
    dataSubject: text("data_subject")
  },
  (t) => [
    index("dead_messages_by_queue_status").on(t.queue, t.status, t.receivedAt),
    index("dead_messages_by_data_subject").on(t.tenantId, t.dataSubject).where(sql`data_subject IS NOT NULL`),
    index("dead_messages_not_alerted").on(t.receivedAt).where(sql`alert_id IS NULL`),
    index("dead_messages_by_alert").on(t.alertId),
    index("dead_messages_by_tenant").on(t.tenantId, t.status, t.receivedAt),
    index("dead_messages_by_resolved_at").on(t.resolvedAt)
  ]
)

/**
 * The queue metrics rollup: per queue per minute, one upsert per consumer
 * batch (never a write per message). Lag (now − the message's `created_at`)
 * is kept as a histogram with fixed bounds (`Metrics.lagBoundsMs`) from which
 * the health endpoint estimates p50/p99; processing time per batch likewise.
 * `sent` is added from the isolate's send tally (with a batch's upsert, or by
 * the HTTP edge at most every 10 s); `depth_max` is the deepest backlog a
 * batch of the minute was delivered with, `depth_by_group` the same per group
 * queue of a grouped purpose (`{"3": 1200}`: health adds the groups up);
 * `batch_size_histogram` counts batches by size (`Metrics.batchSizeBounds`).
 * Pruned after 14 days.
 */
export const queueMetrics = sqliteTable(
  "queue_metrics",
  {
    queue: text("queue").notNull(),
    minute: text("minute").notNull(),
    batches: integer("batches").notNull().default(0),
    received: integer("received").notNull().default(0),
    acked: integer("acked").notNull().default(0),
    retried: integer("retried").notNull().default(0),
    deadLettered: integer("dead_lettered").notNull().default(0),
    deadLetteredByReason: text("dead_lettered_by_reason").notNull().default("{}"),
    sent: integer("sent").notNull().default(0),
    depthMax: integer("depth_max"),
    durationMsSum: integer("duration_ms_sum").notNull().default(0),
    durationMsMax: integer("duration_ms_max").notNull().default(0),
    batchSizeMax: integer("batch_size_max").notNull().default(0),
    batchSizeHistogram: text("batch_size_histogram").notNull().default("[]"),
    depthByGroup: text("depth_by_group").notNull().default("{}"),
    lagHistogram: text("lag_histogram").notNull().default("[]"),
    durationHistogram: text("duration_histogram").notNull().default("[]")
  },
  (t) => [primaryKey({ columns: [t.queue, t.minute] }), index("queue_metrics_by_minute").on(t.minute)]
)

/**
 * The `facts` copy: the facts of the types `FACTLINE_FACTS_COPY` names (none by
 * default, see projections/FactsCopy.ts), copied to D1 for analysts' SQL over
 * many streams. The ledger answers a stream's facts itself (`GET /v1/facts?subject=`).
 *
 * Only what `GET /v1/facts` without a subject needs, because D1 bills every
 * index entry as a row written: the primary key is the listing order
 * `(tenant_id, created_at, fact_id)` — a fact's `created_at` is fixed in the
 * ledger, so a re-sent fact still hits the same key and is skipped — and no
 * secondary index (the `facts_by_stream` index went with the subject listing
 * moving to the ledger): one row written per copied fact. A `type` listing
 * walks the tenant's facts in key order.
 * Stored WITHOUT ROWID (migration 0004, written by hand: Drizzle cannot declare it), so an insert is one
 * row written, not two; a test checks it, so a regenerated rebuild of this table cannot drop it silently.
 */
export const facts = sqliteTable(
  "facts",
  {
    tenantId: text("tenant_id").notNull(),
    factId: text("fact_id").notNull(),
    stream: text("stream").notNull(),
    sequence: integer("sequence").notNull(),
    type: text("type").notNull(),
    body: text("body").notNull(),
    causationId: text("causation_id").notNull(),
    correlationId: text("correlation_id").notNull(),
    causedBy: text("caused_by").notNull(),
    createdAt: text("created_at").notNull(),
    /** W3C trace context of the fact (null for facts from before it); not indexed. */
    traceparent: text("traceparent"),
    /** The `schema_version` of `body` (the fact's type's latest when it was copied; 1 for facts copied before versions). */
    schemaVersion: integer("schema_version").notNull().default(1)
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.createdAt, t.factId] })]
)

/** Fact ids already applied by additive projections (sums, counts): applying twice is a no-op. * Stored WITHOUT ROWID (migration 0004, written by hand: Drizzle cannot declare it), so an insert is one
 * row written, not two; a test checks it, so a regenerated rebuild of this table cannot drop it silently.
 */
export const projectionApplied = sqliteTable(
  "projection_applied",
  {
    projection: text("projection").notNull(),
    factId: text("fact_id").notNull(),
    /** The fact's tenant: what a move copies with the tenant (null on rows recorded before migration 0014). */
    tenantId: text("tenant_id")
  },
  (t) => [primaryKey({ columns: [t.projection, t.factId] })]
)

/**
 * Projection rebuilds: a shadow table is filled from the ledger, then swapped in.
 * `tenant_id` is the tenant of the token that started it; only that tenant reads
 * the record. Records from before the column existed belong to the platform
 * (`factline`, `Rebuild.platformTenant`), never to a customer tenant.
 */
export const projectionRebuilds = sqliteTable(
  "projection_rebuilds",
  {
    id: text("id").primaryKey(),
    tenantId: text("tenant_id").notNull().default("factline"),
    projection: text("projection").notNull(),
    shadowTable: text("shadow_table").notNull(),
    status: text("status", { enum: ["running", "completed", "failed"] }).notNull(),
    shardsTotal: integer("shards_total").notNull(),
    shardsDone: integer("shards_done").notNull().default(0),
    factsReplayed: integer("facts_replayed").notNull().default(0),
    /** Replayed facts the projection's mapping threw for: left out of the rebuilt table (as live traffic leaves them out). */
    factsFailed: integer("facts_failed").notNull().default(0),
    /** The first of them: which fact and the mapping's error. */
    firstFailure: text("first_failure"),
    error: text("error"),
    startedAt: text("started_at").notNull(),
    finishedAt: text("finished_at")
  },
  (t) => [index("projection_rebuilds_by_status").on(t.status, t.projection)]
)

/**
 * Every tenant the ledger has seen, with its shard count, recorded once when
 * the tenant is first seen so that it never silently changes (a different
 * count would move streams between shards). Only a reshard (placement/Reshard.ts)
 * changes it: while one runs, `resharding_to` is the new count and
 * `shards_switched` how many of the old shards (0, 1, … in order) have handed
 * their moving streams over — a stream whose old shard is switched routes by
 * the new count; the last switch sets `shard_count` and clears both.
 */
export const ledgerTenants = sqliteTable("ledger_tenants", {
  tenantId: text("tenant_id").primaryKey(),
  shardCount: integer("shard_count").notNull(),
  firstSeenAt: text("first_seen_at").notNull(),
  reshardingTo: integer("resharding_to"),
  shardsSwitched: integer("shards_switched").notNull().default(0)
})

/**
 * A tenant's reshard (placement/Reshard.ts, a resumable operation of the batch queue): raising its shard count
 * under live traffic, one old shard at a time. `shard` is the old shard being worked on and `stage` how far
 * (held → copied → switched → dropped); `progress` holds the copy's cursor and digests.
 */
export const ledgerReshards = sqliteTable(
  "ledger_reshards",
  {
    id: text("id").primaryKey(),
    tenantId: text("tenant_id").notNull(),
    fromShards: integer("from_shards").notNull(),
    toShards: integer("to_shards").notNull(),
    phase: text("phase", { enum: ["running", "done", "failed"] }).notNull(),
    shard: integer("shard").notNull().default(0),
    stage: text("stage", { enum: ["hold", "copy", "verify", "switch", "drop"] }).notNull().default("hold"),
    progress: text("progress").notNull().default("{}"),
    error: text("error"),
    startedBy: text("started_by").notNull(),
    startedAt: text("started_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    finishedAt: text("finished_at")
  },
  (t) => [index("ledger_reshards_by_tenant").on(t.tenantId, t.startedAt)]
)

/**
 * Every ledger shard: all N shards of a tenant are registered when the tenant
 * is first seen (LedgerTopology). Rebuilds enumerate shards from here; a shard
 * whose relay fallback is failing marks itself pending, and the scheduled
 * sweep re-arms shards pending too long.
 */
export const ledgerShards = sqliteTable(
  "ledger_shards",
  {
    shardKey: text("shard_key").primaryKey(),
    tenantId: text("tenant_id").notNull(),
    registeredAt: text("registered_at").notNull(),
    relayPendingSince: text("relay_pending_since"),
    lastRelayedAt: text("last_relayed_at")
  },
  (t) => [index("ledger_shards_by_pending").on(t.relayPendingSince)]
)

/**
 * Idempotency keys accepted at the HTTP edge (`POST /v1/events`) and claimed by the events consumer, with the hash
 * of what was accepted under each: the same key with another payload is refused
 * (422 `idempotency_conflict`), with the same payload it is a replay. Written and
 * read only by `producing/AcceptedKeys.ts`.
 * Stored WITHOUT ROWID (migration 0004, written by hand: Drizzle cannot declare it), so an insert is one
 * row written, not two; a test checks it, so a regenerated rebuild of this table cannot drop it silently.
 */
export const acceptedKeys = sqliteTable(
  "accepted_keys",
  {
    tenantId: text("tenant_id").notNull(),
    idempotencyKey: text("idempotency_key").notNull(),
    payloadHash: text("payload_hash").notNull(),
    messageType: text("message_type").notNull(),
    subject: text("subject").notNull(),
    acceptedAt: text("accepted_at").notNull()
  },
  // No index on accepted_at (it cost a row written per key, twice: insert and delete): retention walks the
  // primary key a window per scheduled run (AcceptedKeys.prune, its place kept in `sweep_cursors`).
  (t) => [primaryKey({ columns: [t.tenantId, t.idempotencyKey] })]
)

/**
 * Where a retention sweep that walks a table by its primary key stopped, in this database: one row per
 * sweep (today `accepted_keys`), `after` the JSON array of the last key walked (null: the next run starts
 * from the table's first key), `pass_started_at` when the current pass over the table began. Written only
 * by `producing/AcceptedKeys.ts`.
 */
export const sweepCursors = sqliteTable("sweep_cursors", {
  sweep: text("sweep").primaryKey(),
  after: text("after"),
  passStartedAt: text("pass_started_at").notNull(),
  updatedAt: text("updated_at").notNull()
})

/**
 * Tenants' webhook endpoints (admin API). `version` increases with every
 * change (url, types, enabled, secret) and travels in each delivery as
 * `webhook_config_version`. Secrets are stored sealed (AES-GCM, see
 * webhooks/Secrets.ts), never in clear; the previous secret keeps signing
 * until `previous_secret_expires_at` after a rotation. `failing_since` is the
 * first failed attempt since the last success: an endpoint failing for longer
 * than the disable period is disabled. `max_per_second` and `max_in_flight`
 * (null: no limit) throttle its deliveries across isolates (webhooks/EndpointLimiter.ts).
 */
export const webhookEndpoints = sqliteTable(
  "webhook_endpoints",
  {
    tenantId: text("tenant_id").notNull(),
    id: text("id").notNull(),
    url: text("url").notNull(),
    description: text("description"),
    eventTypes: text("event_types").notNull(),
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    version: integer("version").notNull().default(1),
    secretSealed: text("secret_sealed").notNull(),
    previousSecretSealed: text("previous_secret_sealed"),
    previousSecretExpiresAt: text("previous_secret_expires_at"),
    disabledReason: text("disabled_reason"),
    failingSince: text("failing_since"),
    maxPerSecond: integer("max_per_second"),
    maxInFlight: integer("max_in_flight"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull()
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.id] })]
)

/**
 * One row per delivery (fact × endpoint; `delivery_id` is the `webhook-id`):
 * its state across attempts, and the delivery message itself so a failed
 * delivery can be recovered (re-sent) later.
 */
export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    tenantId: text("tenant_id").notNull(),
    deliveryId: text("delivery_id").notNull(),
    endpointId: text("endpoint_id").notNull(),
    factId: text("fact_id").notNull(),
    eventType: text("event_type").notNull(),
    status: text("status", { enum: ["pending", "succeeded", "failing", "failed", "skipped"] }).notNull(),
    attempts: integer("attempts").notNull().default(0),
    lastStatusCode: integer("last_status_code"),
    lastAttemptedAt: text("last_attempted_at"),
    message: text("message").notNull()
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.deliveryId] }), index("webhook_deliveries_by_endpoint").on(t.tenantId, t.endpointId, t.status, t.lastAttemptedAt)]
)

/**
 * The delivery log: one row per attempt (what `GET /v1/webhooks/endpoints/:id/attempts` lists, newest first),
 * and per delivery held back by the endpoint's rate limit (`throttled`: nothing sent, delayed, no attempt spent).
 */
export const webhookAttempts = sqliteTable(
  "webhook_attempts",
  {
    tenantId: text("tenant_id").notNull(),
    endpointId: text("endpoint_id").notNull(),
    attemptedAt: text("attempted_at").notNull(),
    deliveryId: text("delivery_id").notNull(),
    attempt: integer("attempt").notNull(),
    eventType: text("event_type").notNull(),
    factId: text("fact_id").notNull(),
    succeeded: integer("succeeded", { mode: "boolean" }).notNull(),
    statusCode: integer("status_code"),
    durationMs: integer("duration_ms").notNull(),
    responseSnippet: text("response_snippet"),
    error: text("error"),
    throttled: integer("throttled", { mode: "boolean" }).notNull().default(false),
    /** The data subject of the delivered fact's personal data, for its erasure (null when it has none). */
    dataSubject: text("data_subject")
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.endpointId, t.attemptedAt, t.deliveryId, t.attempt] }),
    index("webhook_attempts_by_data_subject").on(t.tenantId, t.dataSubject).where(sql`data_subject IS NOT NULL`)
  ]
)

/**
 * Batch jobs other than rebuilds (import, export, reconcile): one record per job,
 * tenant-scoped (only `tenant_id` reads or cancels it), written only by
 * `batch/BatchJobs.ts`. `status` goes `queued → running → succeeded | failed`,
 * or `→ cancelled` from queued or running. Progress is per chunk: `chunks_done`
 * counts the chunk messages whose work is recorded (a redelivered chunk whose
 * number is below it does nothing again); `offset` is the lines (items) done and
 * `cursor` the byte position in the input object (R2, `input_key`) where the next
 * chunk starts. `errors` keeps the first 100 item errors (JSON array of
 * `{ line, error }`); `error` why the job itself failed.
 */
export const batchJobs = sqliteTable(
  "batch_jobs",
  {
    id: text("id").primaryKey(),
    tenantId: text("tenant_id").notNull(),
    operation: text("operation", { enum: ["import", "export", "reconcile"] }).notNull(),
    status: text("status", { enum: ["queued", "running", "succeeded", "failed", "cancelled"] }).notNull(),
    /** What the job was asked to do (JSON), without the items themselves. */
    params: text("params").notNull().default("{}"),
    inputKey: text("input_key"),
    outputKey: text("output_key"),
    /** Items in the job when known up front (an inline import); null until the end for a manifest. */
    total: integer("total"),
    offset: integer("offset").notNull().default(0),
    cursor: integer("cursor").notNull().default(0),
    chunksDone: integer("chunks_done").notNull().default(0),
    succeeded: integer("succeeded").notNull().default(0),
    failed: integer("failed").notNull().default(0),
    errors: text("errors").notNull().default("[]"),
    error: text("error"),
    createdAt: text("created_at").notNull(),
    startedAt: text("started_at"),
    finishedAt: text("finished_at"),
    updatedAt: text("updated_at").notNull()
  },
  (t) => [index("batch_jobs_by_tenant").on(t.tenantId, t.createdAt, t.id)]
)

/**
 * Where each tenant's read side lives (platform database): the index of its
 * read database (`FACTLINE_READ_DB_<n>`), chosen on the tenant's first use and
 * recorded so that it never changes silently — only a move changes it. Written
 * only by `placement/Placement.ts`. `frozen_since` is set while a move takes
 * its last copy: writers of the tenant wait (retry) until it is cleared.
 */
export const tenantPlacements = sqliteTable(
  "tenant_placements",
  {
    tenantId: text("tenant_id").primaryKey(),
    database: integer("database").notNull(),
    placedAt: text("placed_at").notNull(),
    frozenSince: text("frozen_since"),
    /**
     * Set when an operator removed a placement that held no data (`DELETE /v1/tenants/:tenant/placement`):
     * not listed nor counted any more; the tenant's next use clears it and keeps the same database, so a
     * writer that still trusted the placement never splits the tenant's rows across two databases.
     */
    removedAt: text("removed_at")
  },
  (t) => [index("tenant_placements_by_database").on(t.database)]
)

/**
 * Moves of a tenant's read side between read databases (platform database),
 * one record per move, written only by `placement/Move.ts`. `phase` goes
 * `copying → frozen → switched → dropped`, or ends `failed`; `copied` counts
 * rows copied per table (JSON), `verified` the per-table row counts compared.
 */
export const tenantMoves = sqliteTable(
  "tenant_moves",
  {
    id: text("id").primaryKey(),
    tenantId: text("tenant_id").notNull(),
    fromDatabase: integer("from_database").notNull(),
    toDatabase: integer("to_database").notNull(),
    phase: text("phase", { enum: ["copying", "frozen", "switched", "dropped", "failed"] }).notNull(),
    copied: text("copied").notNull().default("{}"),
    verified: text("verified"),
    error: text("error"),
    startedBy: text("started_by").notNull(),
    startedAt: text("started_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    finishedAt: text("finished_at"),
    /** The one projection moved (its table and applied set), or null: the tenant's home and what lives there. */
    projection: text("projection"),
    /** A split of `projection` into parts: the read database of each part (a JSON array, placement/Split.ts); null: moved whole. */
    parts: text("parts")
  },
  (t) => [index("tenant_moves_by_tenant").on(t.tenantId, t.startedAt)]
)

/**
 * A tenant's projection placed outside the tenant's home read database (platform database, written only by
 * `placement/Move.ts`): the projection's table rows and applied set of the tenant live in read database
 * `database`. No row: the projection lives in the tenant's home (`tenant_placements.database`). `frozen_since`: a
 * move of the projection holds its writes (the tenant's other writes go on). Read with the tenant's placement, in
 * the same statement (no extra round trip).
 */
export const projectionPlacements = sqliteTable(
  "projection_placements",
  {
    tenantId: text("tenant_id").notNull(),
    projection: text("projection").notNull(),
    database: integer("database").notNull(),
    placedAt: text("placed_at").notNull(),
    frozenSince: text("frozen_since"),
    /**
     * A projection in parts (placement/Parts.ts): the read database of each part, a JSON array of k indexes (k a power
     * of two); a row lives in part hash(its key) mod k. `database` is then the first part's. Null: placed whole.
     */
    parts: text("parts")
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.projection] })]
)

/**
 * Deletions of a departed tenant's whole data (platform database), one record per deletion, written only by
 * `placement/Deletion.ts`. `phase` goes `held → workflows → ledger → objects → rows → verified → deleted`, or ends
 * `failed`; `progress` holds each store's cursor and counts (JSON), `report` what was removed per store and the
 * re-count that found nothing left. The record itself is kept (the tenant id, counts and times: no data of the
 * tenant's), the answer to "was it deleted, and when".
 */
export const tenantDeletions = sqliteTable(
  "tenant_deletions",
  {
    id: text("id").primaryKey(),
    tenantId: text("tenant_id").notNull(),
    phase: text("phase", { enum: ["held", "workflows", "ledger", "objects", "rows", "verified", "deleted", "failed"] }).notNull(),
    progress: text("progress").notNull().default("{}"),
    report: text("report"),
    error: text("error"),
    startedBy: text("started_by").notNull(),
    startedAt: text("started_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    finishedAt: text("finished_at")
  },
  (t) => [index("tenant_deletions_by_tenant").on(t.tenantId, t.startedAt)]
)

/**
 * Erasures of a data subject's personal data (the tenant's read database: a move copies it, a tenant's deletion
 * deletes it), one record per erasure, written only by `personal/Erasure.ts`. `phase` goes `keys → waiting →
 * cleaning → audit → erased`, or ends `failed`; `progress` holds the step's state (JSON: generations erased, when
 * the keys went, each store's counts), `report` what was removed per store. The record holds the pseudonymous
 * subject id, counts and times, never personal data: the answer to "was it erased, and when".
 */
export const subjectErasures = sqliteTable(
  "subject_erasures",
  {
    id: text("id").primaryKey(),
    tenantId: text("tenant_id").notNull(),
    subject: text("subject").notNull(),
    phase: text("phase", { enum: ["keys", "waiting", "cleaning", "audit", "erased", "failed"] }).notNull(),
    progress: text("progress").notNull().default("{}"),
    report: text("report"),
    error: text("error"),
    requestedBy: text("requested_by").notNull(),
    startedAt: text("started_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    finishedAt: text("finished_at")
  },
  (t) => [index("subject_erasures_by_subject").on(t.tenantId, t.subject, t.startedAt)]
)

/**
 * The platform's alert state (platform database), one row per alert key — `health` (the graded queue
 * health) and `dead_letters` — written only by `operations/Alerts.ts`. `state` is the last graded level and
 * `changed_at` when it last changed; `sent_state` the level the last alert announced and `sent_at` when it
 * was handed to the webhooks queue (the quiet period runs from there). `version` is bumped by each alert
 * (compare-and-swap: of concurrent evaluations one emits), and the alert id derives from `key` and
 * `version`. `pending` holds the alert being handed over (JSON) until it is, so a crash between the
 * decision and the send is finished by a later evaluation.
 */
export const alertState = sqliteTable("alert_state", {
  key: text("key").primaryKey(),
  state: text("state").notNull(),
  changedAt: text("changed_at").notNull(),
  sentState: text("sent_state"),
  sentAt: text("sent_at"),
  version: integer("version").notNull().default(0),
  pending: text("pending"),
  pendingSince: text("pending_since")
})

/**
 * The runs view (platform database): one row per queue message — its redeliveries, a park's re-send and a
 * "retry now" copy are the same run — updated by each attempt the consumer runtime records (every attempt
 * that does not succeed at once; every attempt with `FACTLINE_RUNS=all`). `attempts` counts the recorded
 * attempts, `attempt` is the queue's number of the latest; `outcome` is `ok`, `retry`, `park`, `dead` or
 * `rerun` (a copy sent by "retry now", not attempted yet); `body` is kept while the run may be retried
 * (for "retry now"), dropped when it settles. Written and read only by `consuming/Runs.ts`; pruned by age
 * and by count (Maintenance).
 */
export const runs = sqliteTable(
  "runs",
  {
    id: text("id").primaryKey(),
    queue: text("queue").notNull(),
    messageId: text("message_id").notNull(),
    tenantId: text("tenant_id"),
    messageType: text("message_type"),
    subject: text("subject"),
    idempotencyKey: text("idempotency_key"),
    traceId: text("trace_id"),
    attempt: integer("attempt").notNull(),
    attempts: integer("attempts").notNull().default(1),
    outcome: text("outcome", { enum: ["ok", "retry", "park", "dead", "rerun"] }).notNull(),
    error: text("error"),
    nextRetryAt: text("next_retry_at"),
    body: text("body"),
    firstAttemptedAt: text("first_attempted_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    /** The data subject of the message's personal data, for its erasure (null when it has none). */
    dataSubject: text("data_subject")
  },
  (t) => [
    index("runs_by_updated_at").on(t.updatedAt),
    index("runs_by_tenant").on(t.tenantId, t.updatedAt),
    index("runs_by_data_subject").on(t.tenantId, t.dataSubject).where(sql`data_subject IS NOT NULL`)
  ]
)

/**
 * What the deployment knows of each registered projection's mapping version (platform database), one row per
 * projection, written only by `operations/CatchUp.ts`. A projection without a row (new to the deployment), or
 * whose definition's `version` differs from the row's, catches up: a rebuild started by the system replays the
 * ledger into it (`rebuild_id`), and the row says `catching_up` until the rebuild has swapped, then `current`.
 * `not_migrated`: the projection's table is missing from a read database (`detail` says which); it catches
 * up once the migration is applied.
 */
export const projectionVersions = sqliteTable("projection_versions", {
  projection: text("projection").primaryKey(),
  version: integer("version").notNull(),
  status: text("status", { enum: ["catching_up", "current", "not_migrated"] }).notNull(),
  rebuildId: text("rebuild_id"),
  detail: text("detail"),
  updatedAt: text("updated_at").notNull()
})

/**
 * Workflow instances as the operators see them (`GET /v1/workflows`, the dashboard): one row per instance,
 * keyed by tenant and instance id, written when a fact starts it and as it moves (the step it is on, its
 * attempts, what it waits for and until when, the facts it appended, how it ended). Cloudflare Workflows keeps
 * the instance itself; this is the index it has no API for (a binding cannot list instances). Pruned by age
 * once ended (Maintenance). `alert_id` is the `factline.workflow.failed` alert that announced the instance's
 * failure and `alerted_at` the `updated_at` it announced (operations/Alerts.ts claims each failure once; an
 * instance retried that fails again is announced again): null until an alert has.
 */
export const workflowInstances = sqliteTable(
  "workflow_instances",
  {
    tenantId: text("tenant_id").notNull(),
    instanceId: text("instance_id").notNull(),
    workflow: text("workflow").notNull(),
    subject: text("subject").notNull(),
    startFactId: text("start_fact_id").notNull(),
    status: text("status", { enum: ["queued", "running", "sleeping", "waiting", "compensating", "complete", "failed", "terminated"] }).notNull(),
    step: text("step"),
    attempts: integer("attempts").notNull().default(0),
    waitingFor: text("waiting_for"),
    waitUntil: text("wait_until"),
    /** JSON array of the ids of the facts it appended. */
    facts: text("facts").notNull().default("[]"),
    error: text("error"),
    traceparent: text("traceparent"),
    startedAt: text("started_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    alertId: text("alert_id"),
    alertedAt: text("alerted_at")
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.instanceId] }),
    index("workflow_instances_by_tenant_updated").on(t.tenantId, t.updatedAt),
    index("workflow_instances_by_updated").on(t.updatedAt),
    index("workflow_instances_failed").on(t.updatedAt).where(sql`status = 'failed'`),
    index("workflow_instances_by_alert").on(t.alertId)
  ]
)
