/** @factline/workers — Cloudflare entrypoints: `makePlatform(modules)` and the LedgerShard and EndpointLimiter Durable Objects. */
export { consume, consumers, makePlatform, type Platform } from "./Platform.js"
export { LedgerShard } from "./LedgerShard.js"
export { EndpointLimiter } from "./EndpointLimiter.js"
export { FactlineWorkflow } from "./FactlineWorkflow.js"
export type { PlatformEnv } from "./Env.js"
export * as Auth from "./http/Auth.js"
export * as Api from "./http/Api.js"
