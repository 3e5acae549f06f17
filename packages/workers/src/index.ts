/** @factline/workers — Cloudflare entrypoints: `makePlatform(modules)` and the LedgerShard Durable Object. */
export {
  acceptedKeysPrunedPerRun,
  acceptedKeysRetentionDays,
  inboxRetentionDays,
  makePlatform,
  type Platform,
  pruneAcceptedKeys,
  sweepStaleRelays
} from "./Platform.js"
export { LedgerShard } from "./LedgerShard.js"
export type { PlatformEnv } from "./Env.js"
export * as Auth from "./http/Auth.js"
export * as Api from "./http/Api.js"
