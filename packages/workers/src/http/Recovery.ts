/**
 * The handlers of the Recovery routes, implemented against their description (`@factline/core/api`'s `Recovery`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { Recovery, Settings } from "@factline/core/runtime"
import { apiOf } from "./Edge.js"
import { Recovery as Description } from "@factline/core/api"

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "recovery", (handlers) =>
  handlers.handle("recover", ({ payload: { since, dry_run, cursor } }) =>
    Effect.flatMap(Settings.Settings, (settings) =>
      Recovery.recover({
        since: new Date(since).toISOString(),
        dryRun: dry_run === true,
        keepAcceptedMs: settings.keepAcceptedMs,
        ...(cursor === undefined ? {} : { cursor })
      }))))
