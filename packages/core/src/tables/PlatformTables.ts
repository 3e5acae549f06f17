/**
 * The platform's D1 tables, as Drizzle schema. drizzle-kit generates the
 * migrations in `migrations/` from this file; analysts can import it to query
 * D1 with Drizzle. Runtime code uses bound SQL shaped by these definitions.
 */
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

/** Dead-lettered messages with their failure context, as persisted by the DLQ consumers. */
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
    originalMessage: text("original_message").notNull(),
    status: text("status", { enum: ["pending", "replayed", "skipped"] }).notNull().default("pending"),
    receivedAt: text("received_at").notNull()
  },
  (t) => [index("dead_messages_by_queue_status").on(t.queue, t.status, t.receivedAt), index("dead_messages_by_tenant").on(t.tenantId)]
)

/**
 * The `facts` projection: every fact of every shard, copied to D1 for analysts.
 *
 * Only what `GET /v1/facts` needs, because D1 bills every index entry as a
 * row written: the primary key is the listing order `(tenant_id, created_at,
 * fact_id)` — a fact's `created_at` is fixed in the ledger, so a re-sent fact
 * still hits the same key and is skipped — and one index serves `subject`
 * (with or without `type`). A `type`-only listing walks the tenant's facts in
 * key order; no index of its own (3 rows written per fact instead of 5).
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
    createdAt: text("created_at").notNull()
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.createdAt, t.factId] }),
    index("facts_by_stream").on(t.tenantId, t.stream, t.createdAt, t.factId)
  ]
)

/** Fact ids already applied by additive projections (sums, counts): applying twice is a no-op. * Stored WITHOUT ROWID (migration 0004, written by hand: Drizzle cannot declare it), so an insert is one
 * row written, not two; a test checks it, so a regenerated rebuild of this table cannot drop it silently.
 */
export const projectionApplied = sqliteTable(
  "projection_applied",
  {
    projection: text("projection").notNull(),
    factId: text("fact_id").notNull()
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
 * count would move streams between shards).
 */
export const ledgerTenants = sqliteTable("ledger_tenants", {
  tenantId: text("tenant_id").primaryKey(),
  shardCount: integer("shard_count").notNull(),
  firstSeenAt: text("first_seen_at").notNull()
})

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
 * Idempotency keys accepted at the HTTP edge (`POST /v1/events`), with the hash
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
  (t) => [primaryKey({ columns: [t.tenantId, t.idempotencyKey] }), index("accepted_keys_by_accepted_at").on(t.acceptedAt)]
)
