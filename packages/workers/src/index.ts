/** @factline/workers — Cloudflare entrypoints: `makePlatform(modules)` and the LedgerShard Durable Object. */
export {
  acceptedKeysPrunedPerRun,
  acceptedKeysRetentionDays,
  deadLetterRetentionDays,
  inboxRetentionDays,
  makePlatform,
  metricsRetentionDays,
  type Platform,
  pruneAcceptedKeys,
  pruneOperations,
  recordMetrics,
  sweepStaleRelays
} from "./Platform.js"
export { LedgerShard } from "./LedgerShard.js"
export type { PlatformEnv } from "./Env.js"
export * as Auth from "./http/Auth.js"
export * as Api from "./http/Api.js"
