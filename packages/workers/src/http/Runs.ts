/**
 * The handlers of the Runs routes, implemented against their description (`@factline/core/api`'s `Runs`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { Failure } from "@factline/core"
import { Contract, Runs as Description } from "@factline/core/api"
import { Runs, Settings } from "@factline/core/runtime"
import { Issues } from "@factline/schemas"
import type { Principal } from "./Auth.js"
import { apiOf, Caller } from "./Edge.js"

const scopeOf = (p: Principal): Runs.Scope => ({ tenantId: p.scopes.includes("platform") ? null : p.tenantId })

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "runs", (handlers) =>
  handlers
    .handle("listRuns", ({ query: { cursor, limit, ...filters } }) =>
      Effect.gen(function*() {
        const wrong = Runs.validateFilters(filters)
        if (wrong.length > 0) return yield* new Failure.InvalidInput({ code: "invalid_query", message: Issues.render(wrong), problems: wrong })
        const page = yield* (yield* Runs.Runs).list(scopeOf(yield* Caller), filters, { limit: Contract.pageLimit(limit, Description.listLimit), ...(cursor === undefined ? {} : { cursor }) })
        return { ...page, recording: (yield* Settings.Settings).runs }
      }))
    .handle("retryRun", ({ params }) => Effect.flatMap(Effect.service(Caller), (caller) => Runs.retryNow(scopeOf(caller), params.id))))
