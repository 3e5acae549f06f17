/** @factline/workers — Cloudflare entrypoints: `makePlatform(modules)` and the LedgerShard Durable Object. */
export { makePlatform, type Platform, inboxRetentionDays, deadLetterRetentionDays, metricsRetentionDays, pruneOperations, recordMetrics, sweepStaleRelays } from "./Platform.js"
export { LedgerShard } from "./LedgerShard.js"
export type { PlatformEnv } from "./Env.js"
export * as Auth from "./http/Auth.js"
