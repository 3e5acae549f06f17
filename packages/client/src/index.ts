/**
 * @factline/client — the typed HTTP client of a factline platform, for services outside Workers: emit
 * events checked against their message definitions (batched, retried with the same idempotency keys),
 * read streams, facts and projections typed by their definitions. Needs only `fetch`.
 */
export * as Client from "./Client.js"
export * from "./ClientError.js"
export type { Emitted } from "./Batcher.js"
