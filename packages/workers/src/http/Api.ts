/**
 * The HTTP API (docs/architecture.md "A message's journey"), one module per resource — Events, Facts, Projections, Batches,
 * DeadLetters, Runs, Queues, Webhooks, Alerts, Documents — each describing its routes once (Contract.ts) and binding its
 * handlers to them; `Routes.ts` puts the descriptions together.
 *
 * Every route but the public documents and `GET /health` (liveness) authenticates (Auth.ts) and is scoped to the token's tenant: a
 * tenant can neither write into nor read from another tenant's data. Bad input is a 4xx with a JSON error
 * naming every problem; anything unexpected is a 500 with a generic message — never a stack, SQL text or
 * a secret.
 */
import * as HttpApi from "effect/http-api/HttpApi"
import * as Layer from "effect/Layer"
import { Hono } from "hono"
import { Failure, type Registry } from "@factline/core"
import type { PlatformEnv } from "../Env.js"
import type { PlatformRuntime } from "../Services.js"
import * as Alerts from "./Alerts.js"
import * as Batches from "./Batches.js"
import type { AppEnv } from "./Contract.js"
import * as DeadLetters from "./DeadLetters.js"
import * as Documents from "./Documents.js"
import { respond } from "./Problem.js"
import * as Events from "./Events.js"
import * as Facts from "./Facts.js"
import * as Health from "./Health.js"
import * as Projections from "./Projections.js"
import * as Queues from "./Queues.js"
import * as Recovery from "./Recovery.js"
import * as Runs from "./Runs.js"
import * as Tenants from "./Tenants.js"
import { api } from "./Routes.js"
import { makeRun } from "./Run.js"
import * as Serve from "./Serve.js"
import * as Webhooks from "./Webhooks.js"

export { maxBodyBytes } from "./JsonBody.js"
export { maxUrlBytes } from "./Contract.js"
export { maxEventsPerRequest } from "./Events.js"
export { api, publicRoutes, type Route, routes } from "./Routes.js"

/**
 * The groups served from their description (Serve.ts): their handlers are Effects against their endpoints.
 * The others are still bound to Hono (`Contract.bind`); each route is served by exactly one of the two.
 */
export const served = Serve.make(
  HttpApi.make("factline").add(Runs.group).add(Recovery.group).add(Queues.group).add(DeadLetters.group).add(Alerts.group).add(Tenants.group).add(Facts.group).add(Batches.group).add(Webhooks.group).add(Projections.group).add(Health.group).add(Documents.group),
  Layer.mergeAll(Runs.handlers, Recovery.handlers, Queues.handlers, DeadLetters.handlers, Alerts.handlers, Tenants.handlers, Facts.handlers, Batches.handlers, Webhooks.handlers, Projections.handlers, Health.handlers, Documents.handlers(api))
)

export const make = (registry: Registry.Shape, runtime: (env: PlatformEnv) => PlatformRuntime) => {
  const app = new Hono<AppEnv>()
  const run = makeRun(runtime)
  served.forward(app, runtime)
  Events.mount(app, { registry, run })

  // Handlers and middleware throw members of the failure family; this is where they become responses.
  app.notFound((c) => respond(c, new Failure.NotFound({ message: `no route for ${c.req.method} ${new URL(c.req.url).pathname}` })))
  app.onError((error, c) => respond(c, error))
  return app
}
