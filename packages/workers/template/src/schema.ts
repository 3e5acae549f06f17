/**
 * Every D1 table as one Drizzle schema: the platform's and each module's projection tables. drizzle-kit
 * generates `migrations/` from it (`npm run db:generate`; add a new module's `Tables.ts` here), and analysts
 * query with `drizzle(env.DB, { schema })`.
 */
export * from "@factline/core/tables"
export * from "./orders/Tables.js"
