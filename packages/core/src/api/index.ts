/**
 * `@factline/core/api` — the HTTP API's description: every route as an Effect `HttpApiEndpoint` (method,
 * path, parameters, body, answers and errors as schemas) grouped by resource, the helpers they are built
 * with (Contract), the error shape (Problem) and the edge middleware they declare (Edge), and `api`, all of
 * them together. @factline/workers implements the handlers against it; @factline/client derives its client
 * from it. Nothing of Cloudflare, Hono or the runtime: a browser bundle can carry it.
 */
export { api } from "./Api.js"
export * as Alerts from "./Alerts.js"
export * as Batches from "./Batches.js"
export * as Contract from "./Contract.js"
export * as DeadLetters from "./DeadLetters.js"
export * as Documents from "./Documents.js"
export * as Edge from "./Edge.js"
export * as Events from "./Events.js"
export * as Facts from "./Facts.js"
export * as Health from "./Health.js"
export * as Problem from "./Problem.js"
export * as Projections from "./Projections.js"
export * as Queues from "./Queues.js"
export * as Recovery from "./Recovery.js"
export * as Runs from "./Runs.js"
export * as Subjects from "./Subjects.js"
export * as Tenants from "./Tenants.js"
export * as Webhooks from "./Webhooks.js"
export * as Workflows from "./Workflows.js"
