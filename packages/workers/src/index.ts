/** @factline/workers — Cloudflare entrypoints: `makePlatform(modules)` and the LedgerShard Durable Object. */
export { consume, consumers, makePlatform, type Platform } from "./Platform.js"
export { LedgerShard } from "./LedgerShard.js"
export type { PlatformEnv } from "./Env.js"
export * as Auth from "./http/Auth.js"
export * as Api from "./http/Api.js"
