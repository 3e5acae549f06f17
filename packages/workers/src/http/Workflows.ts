/**
 * The handlers of the Workflows routes, implemented against their description (`@factline/core/api`'s
 * `Workflows`, where each route's path, parameters, answers and errors are declared); the work is core's
 * `WorkflowOperations`. What each does is documented there.
 */
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { Contract, Workflows as Description } from "@factline/core/api"
import { WorkflowOperations } from "@factline/core/runtime"
import type { Principal } from "./Auth.js"
import { apiOf, Caller } from "./Edge.js"

const scopeOf = (p: Principal): WorkflowOperations.Scope => ({ tenantId: p.scopes.includes("platform") ? null : p.tenantId })
const scoped = <A, E, R>(use: (scope: WorkflowOperations.Scope) => Effect.Effect<A, E, R>) => Effect.flatMap(Effect.service(Caller), (caller) => use(scopeOf(caller)))

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "workflows", (handlers) =>
  handlers
    .handle("listWorkflows", ({ query: { cursor, limit, ...filters } }) =>
      scoped((scope) => WorkflowOperations.list(scope, filters, { limit: Contract.pageLimit(limit, Description.listLimit), ...(cursor === undefined ? {} : { cursor }) })))
    .handle("getWorkflow", ({ params }) => scoped((scope) => WorkflowOperations.show(scope, params.id)))
    .handle("terminateWorkflow", ({ params }) => scoped((scope) => WorkflowOperations.terminate(scope, params.id)))
    .handle("retryWorkflow", ({ params }) => scoped((scope) => WorkflowOperations.retry(scope, params.id))))
