/**
 * The example's projection tables, as Drizzle schema (migrations are generated from it).
 * Analysts import `apps/example/src/schema.ts` to query them with Drizzle.
 */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { Projection } from "@factline/core"

/** One row per call. `<type>_seq` columns make it order-safe (see Projection). */
export const calls = sqliteTable(
  "calls",
  {
    tenant_id: text("tenant_id").notNull(),
    call_id: text("call_id").notNull(),
    buyer_id: text("buyer_id"),
    duration_s: integer("duration_s"),
    currency: text("currency"),
    /** The caller's phone number masked to its last four digits (`"•••• 4567"`); `"[erased]"` once the buyer is erased. */
    caller_phone_masked: text("caller_phone_masked"),
    qualified: integer("qualified", { mode: "boolean" }),
    charged_cents: integer("charged_cents").notNull().default(0),
    refunded_cents: integer("refunded_cents").notNull().default(0),
    ...Projection.sequenceColumns(["outcome", "qualification", "charge", "refund"])
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.call_id] }), index("calls_by_buyer").on(t.tenant_id, t.buyer_id)]
)

/**
 * One row per buyer: `spent_cents` = distinct charges − distinct refunds. Stored WITHOUT ROWID (hand migration
 * 0033; Drizzle cannot declare it), as `calls` is (0011): a new buyer's row is one D1 row written, not two.
 */
export const buyerBudgets = sqliteTable(
  "buyer_budgets",
  {
    tenant_id: text("tenant_id").notNull(),
    buyer_id: text("buyer_id").notNull(),
    spent_cents: integer("spent_cents").notNull().default(0),
    charges: integer("charges").notNull().default(0),
    refunds: integer("refunds").notNull().default(0)
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.buyer_id] })]
)
