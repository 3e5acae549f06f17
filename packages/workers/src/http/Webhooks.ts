/**
 * The handlers of the Webhooks routes, implemented against their description (`@factline/core/api`'s `Webhooks`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { Failure, Registry, Webhook } from "@factline/core"
import { WebhookRecovery, WebhookStore } from "@factline/core/runtime"
import { apiOf, Caller } from "./Edge.js"
import { Contract, Webhooks as Description } from "@factline/core/api"

const store = Effect.service(WebhookStore.WebhookStore)
const tenant = Effect.map(Effect.service(Caller), (caller) => caller.tenantId)

/** The catalog's entries: each event type, the fact type it is published from, its payload's JSON Schema. */
const catalogOf = (registry: Registry.Shape) =>
  [...registry.webhookEvents.values()].map((e) => ({ type: e.type, fact_type: e.fact.type, description: e.description ?? null, schema: Webhook.jsonSchema(e) }))

/** Runs `f` on the webhook store with the caller's tenant. */
const onStore = <A, E, R>(f: (store: WebhookStore.Shape, tenant: string) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.all([store, tenant]), ([s, t]) => f(s, t))

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "webhooks", (handlers) =>
  handlers
    .handle("listEventTypes", () => Effect.map(Effect.service(Registry.Registry), (registry) => ({ data: catalogOf(registry) })))
    .handle("createEndpoint", ({ payload }) =>
      Effect.map(onStore((s, t) => s.create(t, payload)), (result) => ({ ...result.endpoint, secret: result.secret })))
    .handle("listEndpoints", ({ query: { limit, cursor } }) =>
      onStore((s, t) => s.list(t, { limit: Contract.pageLimit(limit, Description.listLimit), ...(cursor === undefined ? {} : { after: cursor }) })))
    .handle("getEndpoint", ({ params }) => onStore((s, t) => s.get(t, params.id)))
    .handle("updateEndpoint", ({ params, payload }) =>
      Object.keys(payload).length === 0
        ? Effect.fail(new Failure.InvalidInput({ message: Description.changeUsage }))
        : onStore((s, t) => s.update(t, params.id, payload)))
    .handle("deleteEndpoint", ({ params }) => onStore((s, t) => s.remove(t, params.id)))
    .handle("rotateSecret", ({ params }) =>
      Effect.map(onStore((s, t) => s.rotate(t, params.id)), (result) => ({ ...result.endpoint, secret: result.secret })))
    .handle("listAttempts", ({ params, query: { limit, cursor } }) =>
      onStore((s, t) => s.attempts(t, params.id, { limit: Contract.pageLimit(limit, Description.listLimit), ...(cursor === undefined ? {} : { before: cursor }) })))
    .handle("recoverEndpoint", ({ params, payload }) =>
      Effect.gen(function*() {
        const since = new Date(payload.since).toISOString()
        return { recovered: yield* WebhookRecovery.recover(yield* tenant, params.id, since), since }
      })))
