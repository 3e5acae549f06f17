import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { describe, expect, it } from "vitest"
import * as Module from "../definitions/Module.js"
import * as Projection from "../definitions/Projection.js"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Schema from "effect/Schema"
import { migratedTables, unmigrated } from "./Migrations.js"

const Placed = FactDefinition.make("order_placed", Schema.Struct({ order_id: Schema.String, currency: Schema.String }))
const orders = sqliteTable("orders", {
  tenant_id: text("tenant_id").notNull(),
  order_id: text("order_id").notNull(),
  currency: text("currency"),
  ...Projection.sequenceColumns(["order_placed"])
}, (t) => [primaryKey({ columns: [t.tenant_id, t.order_id] })])
const projection = Projection.rows({ name: "orders", table: orders, key: ["order_id"], queryable: ["order_id"], on: [Projection.on(Placed, ({ order_id, currency }) => ({ order_id, currency }))] })
const modules = [Module.make("orders", { tables: { orders }, projections: [projection] })]

const created = "CREATE TABLE `orders` (\n\t`tenant_id` text NOT NULL,\n\t`order_id` text NOT NULL,\n\t`order_placed_seq` integer,\n\tPRIMARY KEY(`tenant_id`, `order_id`)\n);\n"

describe("checkMigrations' columns", () => {
  it("names a column of a projection's table that no migration creates or adds (a column added without db:generate)", () => {
    expect(unmigrated(modules, [created])).toEqual([{ projection: "orders", table: "orders", columns: ["currency"] }])
  })

  it("follows ALTER TABLE … ADD, column renames and drizzle-kit's __new_ rebuilds in order", () => {
    expect(unmigrated(modules, [created, "ALTER TABLE `orders` ADD `currency` text;"])).toEqual([])
    expect(unmigrated(modules, [created, "ALTER TABLE `orders` ADD `money` text;", "ALTER TABLE `orders` RENAME COLUMN \"money\" TO \"currency\";"])).toEqual([])
    const rebuilt = "CREATE TABLE `__new_orders` (\n\t`tenant_id` text NOT NULL,\n\t`order_id` text NOT NULL,\n\t`currency` text,\n\t`order_placed_seq` integer\n);\n--> statement-breakpoint\nINSERT INTO `__new_orders` SELECT * FROM `orders`;--> statement-breakpoint\nDROP TABLE `orders`;--> statement-breakpoint\nALTER TABLE `__new_orders` RENAME TO `orders`;"
    expect(unmigrated(modules, [created, rebuilt])).toEqual([])
    expect([...migratedTables([created, rebuilt]).keys()]).toEqual(["orders"])
    expect(unmigrated(modules, [created, "ALTER TABLE `orders` ADD `currency` text;", "ALTER TABLE `orders` DROP COLUMN `currency`;"])).toEqual([{ projection: "orders", table: "orders", columns: ["currency"] }])
    expect(unmigrated(modules, [])).toEqual([{ projection: "orders", table: "orders" }])
  })
})
