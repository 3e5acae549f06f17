/**
 * The HTTP API (docs/architecture.md "A message's journey"), one module per resource — Events, Facts, Projections, Batches,
 * DeadLetters, Runs, Workflows, Queues, Webhooks, Alerts, Documents — each describing its routes once (Contract.ts) and binding its
 * handlers to them; `Routes.ts` puts the descriptions together.
 *
 * Every route but the public documents and `GET /health` (liveness) authenticates (Auth.ts) and is scoped to the token's tenant: a
 * tenant can neither write into nor read from another tenant's data. Bad input is a 4xx with a JSON error
 * naming every problem; anything unexpected is a 500 with a generic message — never a stack, SQL text or
 * a secret.
 */
import * as Layer from "effect/Layer"
import type { PlatformEnv } from "../Env.js"
import type { PlatformRuntime } from "../Services.js"
import * as Alerts from "./Alerts.js"
import * as Batches from "./Batches.js"
import * as DeadLetters from "./DeadLetters.js"
import * as Documents from "./Documents.js"
import * as Events from "./Events.js"
import * as Facts from "./Facts.js"
import * as Health from "./Health.js"
import * as Projections from "./Projections.js"
import * as Queues from "./Queues.js"
import * as Recovery from "./Recovery.js"
import * as Runs from "./Runs.js"
import * as Subjects from "./Subjects.js"
import * as Tenants from "./Tenants.js"
import { api } from "./Routes.js"
import * as Serve from "./Serve.js"
import * as Webhooks from "./Webhooks.js"
import * as Workflows from "./Workflows.js"

export { maxBodyBytes } from "./JsonBody.js"
export { maxUrlBytes } from "./Contract.js"
export { maxEventsPerRequest } from "./Events.js"
export { api, publicRoutes, type Route, routes } from "./Routes.js"

/** Every group's handlers. */
const handlers = Layer.mergeAll(Events.handlers, Runs.handlers, Workflows.handlers, Recovery.handlers, Queues.handlers, DeadLetters.handlers, Alerts.handlers, Tenants.handlers, Subjects.handlers, Facts.handlers, Batches.handlers, Webhooks.handlers, Projections.handlers, Health.handlers, Documents.handlers(api))

/** The Worker's `fetch` for the API: every route served from its description (Serve.ts). */
export const make = (runtime: (env: PlatformEnv) => PlatformRuntime) => Serve.make(api, handlers, runtime)
