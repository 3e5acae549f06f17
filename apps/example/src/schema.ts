/**
 * The example platform's D1 tables as one Drizzle schema: the platform's
 * (inbox, dead_messages, facts, projection bookkeeping, ledger shards) and
 * every registered module's projection tables, read from the one `modules`
 * list. Analysts query with `drizzle(env.DB, { schema })` and
 * `schema.buyerBudgets` (typed). drizzle-kit generates `migrations/` from the
 * platform tables and every module's `Tables.ts` (see drizzle.config.ts).
 */
import { Module } from "@factline/core"
import * as platformTables from "@factline/core/tables"
import { modules } from "./modules.js"

export const schema = { ...platformTables, ...Module.tablesOf(modules) }
