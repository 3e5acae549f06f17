/** The orders module's projection table (drizzle-kit generates its migration from this file: npm run db:generate). */
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { Projection } from "@factline/core"

/** One row per order. The `<fact type>_seq` column makes it order-safe (see Projection). */
export const orders = sqliteTable(
  "orders",
  {
    tenant_id: text("tenant_id").notNull(),
    order_id: text("order_id").notNull(),
    customer_id: text("customer_id"),
    total_cents: integer("total_cents"),
    ...Projection.sequenceColumns(["order_placed"])
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.order_id] })]
)
