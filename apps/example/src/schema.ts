/**
 * Every D1 table of the example platform, as Drizzle schema, in one module:
 * the platform's (inbox, dead_messages, facts, projection bookkeeping, ledger
 * shards) and the projections (calls, buyer_budgets). Analysts query D1 with
 * `drizzle(env.DB, { schema })`; drizzle-kit generates `migrations/` from it.
 */
export * from "@factline/core/tables"
export * from "./calls/Tables.js"
