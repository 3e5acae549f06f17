/**
 * The handlers of the Health routes, implemented against their description (`@factline/core/api`'s `Health`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { apiOf } from "./Edge.js"
import { Health as Description } from "@factline/core/api"

/** Never cached (the edge's `cache-control: no-store`): a probe must reach the Worker, not a cache in front of it. */
export const handlers = HttpApiBuilder.group(apiOf(Description.group), "health", (handlers) =>
  handlers.handle("liveness", () => Effect.succeed({ status: "ok" as const, version: Description.version })))
