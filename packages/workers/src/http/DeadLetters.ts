/**
 * The handlers of the DeadLetters routes, implemented against their description (`@factline/core/api`'s `DeadLetters`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { Failure } from "@factline/core"
import { DeadLetterSkip, DeadLetterSpill, DeadLetterStore } from "@factline/core/runtime"
import { Issues } from "@factline/schemas"
import type { Principal } from "./Auth.js"
import { apiOf, Caller } from "./Edge.js"
import { Contract, DeadLetters as Description } from "@factline/core/api"

const scopeOf = (p: Principal): DeadLetterStore.Scope => ({
  tenantId: p.scopes.includes("platform") ? null : p.tenantId,
  actor: p.name ?? `token of ${p.tenantId}`
})

const store = Effect.service(DeadLetterStore.DeadLetterStore)
const caller = Effect.map(Effect.service(Caller), scopeOf)

/** The filters of the query, checked as the store reads them (a 400 `invalid_query` naming each one at fault). */
const checked = (query: DeadLetterStore.Filters) => {
  const filters = DeadLetterStore.validateFilters(query)
  return filters.ok
    ? Effect.succeed(filters.filters)
    : Effect.fail(new Failure.InvalidInput({ code: "invalid_query", message: Issues.render(filters.problems), problems: filters.problems }))
}

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "deadLetters", (handlers) =>
  handlers
    .handle("listDeadLetters", ({ query: { cursor, limit, ...query } }) =>
      Effect.gen(function*() {
        const filters = yield* checked(query)
        const scope = yield* caller
        const page = yield* (yield* store).list(scope, filters, { limit: Contract.pageLimit(limit, Description.listLimit), ...(cursor === undefined ? {} : { cursor }) })
        if (scope.tenantId !== null) return page
        // Best effort: a bucket that cannot answer is shown as unknown, not as a failure of the page.
        return { ...page, spilled: yield* Effect.orElseSucceed(Effect.map(DeadLetterSpill.count(), (n) => n.count), () => null) }
      }))
    .handle("replayDeadLetters", ({ query }) =>
      Effect.gen(function*() {
        const result = yield* (yield* store).replayMatching(yield* caller, yield* checked(query))
        return { ...result, wave_size: DeadLetterStore.waveSize, wave_delay_seconds: DeadLetterStore.waveDelaySeconds }
      }))
    .handle("getDeadLetter", ({ params }) => Effect.flatMap(caller, (scope) => Effect.flatMap(store, (s) => s.get(scope, params.id))))
    .handle("replayDeadLetter", ({ params }) => Effect.flatMap(caller, (scope) => Effect.flatMap(store, (s) => s.replay(scope, params.id))))
    .handle("skipDeadLetter", ({ params, payload }) =>
      Effect.flatMap(Effect.service(Caller), (principal) => DeadLetterSkip.skip(scopeOf(principal), params.id, payload.reason, principal.tenantId)))
    .handle("escalateDeadLetter", ({ params, payload }) =>
      Effect.flatMap(caller, (scope) => Effect.flatMap(store, (s) => s.resolve(scope, params.id, "escalated", payload.note ?? "")))))
