/**
 * @factline/client — the typed HTTP client of a factline platform, for services outside Workers: emit
 * events checked against their message definitions (batched, retried with the same idempotency keys),
 * read streams, facts and projections typed by their definitions (`Client`); and every route the operators'
 * tools call — queue health, dead letters, batch jobs, uploads, exports — through the one request layer
 * (`Requests`) that the CLI and the dashboard share. Needs only `fetch`.
 */
export * as Api from "./Api.js"
export * as Client from "./Client.js"
export * as Requests from "./Requests.js"
export * from "./ClientError.js"
export type { Emitted } from "./Batcher.js"
