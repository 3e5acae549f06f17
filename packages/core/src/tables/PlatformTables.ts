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
