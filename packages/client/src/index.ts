/**
 * @factline/client — the typed HTTP client of a factline platform, for services outside Workers: emit
 * events checked against their message definitions (batched, retried with the same idempotency keys),
 * read streams, facts and projections typed by their definitions (`Client`); and every route of the API
 * through `Api`, the client derived from the API's description (`@factline/core/api`) that `Client`, the
 * dashboard and the `factline` command call through; the two file routes (an import's upload, an export's
 * download) streamed through `Files`. Needs only `fetch`.
 */
export * as Api from "./Api.js"
export * as Client from "./Client.js"
export * as Files from "./Files.js"
export * from "./ClientError.js"
export type { Emitted } from "./Batcher.js"
