/**
 * The handlers of the Queues routes, implemented against their description (`@factline/core/api`'s `Queues`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { DeadLetterSpill, Metrics } from "@factline/core/runtime"
import { apiOf } from "./Edge.js"
import { Queues as Description } from "@factline/core/api"

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "queues", (handlers) =>
  handlers.handle("queueHealth", ({ query }) =>
    Effect.gen(function*() {
      const window = query.window ?? "1h"
      const since = new Date((yield* Clock.currentTimeMillis) - Description.windows[window]! * 60_000).toISOString()
      // Best effort: a bucket that cannot answer is shown as unknown, not as a failure of the page.
      const spilled = yield* Effect.orElseSucceed(Effect.map(DeadLetterSpill.count(), (c) => c.count), () => null)
      const { queues, relayPendingShards } = yield* Metrics.readHealth(since)
      const graded = Metrics.overall(queues, relayPendingShards)
      // Dead letters waiting in R2 (a D1 outage) are at least a warning: operators cannot see them in the list yet.
      const status: Metrics.Level = graded === "ok" && (spilled ?? 0) > 0 ? "warning" : graded
      return {
        window,
        since,
        status,
        thresholds: Metrics.thresholds,
        queues,
        ledger: { relay_pending_shards: relayPendingShards },
        spilled_dead_letters: spilled
      }
    })))
