/**
 * The handlers of the Alerts routes, implemented against their description (`@factline/core/api`'s `Alerts`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { Failure } from "@factline/core"
import { Alerts, Settings, type WebhookStore } from "@factline/core/runtime"
import { apiOf } from "./Edge.js"
import { Contract, Webhooks, Alerts as Description } from "@factline/core/api"

const tenant = Alerts.tenant

/** Runs `f` on the alert endpoints' store; a change drops this isolate's cached alert configs. */
const onStore = <A, E>(f: (store: WebhookStore.Shape) => Effect.Effect<A, E>, changes: boolean) =>
  Effect.flatMap(Alerts.endpoints, ({ store, changed }) => changes ? Effect.ensuring(f(store), Effect.sync(changed)) : f(store))

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "alerts", (handlers) =>
  handlers
    .handle("alertState", () =>
      Effect.gen(function*() {
        const rows = yield* Alerts.readState()
        const settings = yield* Settings.Settings
        return {
          quiet_period_minutes: settings.alertQuietMs / 60_000,
          window_minutes: Alerts.windowMinutes,
          data: [...rows.values()].map((r) => ({
            key: r.key, state: r.state, changed_at: r.changed_at, announced: r.key.startsWith("health:") ? r.sent_state : null, announced_at: r.sent_at,
            alerts: r.version, pending: r.pending !== null
          }))
        }
      }))
    .handle("evaluateAlerts", () =>
      Effect.map(Effect.flatMap(Settings.Settings, (settings) => Alerts.evaluate({ quietPeriodMs: settings.alertQuietMs })), (sent) => ({ sent: [...sent] })))
    .handle("createAlertEndpoint", ({ payload }) =>
      Effect.map(onStore((s) => s.create(tenant, payload), true), (result) => ({ ...result.endpoint, secret: result.secret })))
    .handle("listAlertEndpoints", ({ query: { limit, cursor } }) =>
      onStore((s) => s.list(tenant, { limit: Contract.pageLimit(limit, Webhooks.listLimit), ...(cursor === undefined ? {} : { after: cursor }) }), false))
    .handle("getAlertEndpoint", ({ params }) => onStore((s) => s.get(tenant, params.id), false))
    .handle("updateAlertEndpoint", ({ params, payload }) =>
      Object.keys(payload).length === 0
        ? Effect.fail(new Failure.InvalidInput({ message: "send the fields to change: url, event_types, description, enabled" }))
        : onStore((s) => s.update(tenant, params.id, payload), true))
    .handle("deleteAlertEndpoint", ({ params }) => onStore((s) => s.remove(tenant, params.id), true))
    .handle("rotateAlertSecret", ({ params }) =>
      Effect.map(onStore((s) => s.rotate(tenant, params.id), true), (result) => ({ ...result.endpoint, secret: result.secret })))
    .handle("listAlertAttempts", ({ params, query: { limit, cursor } }) =>
      onStore((s) => s.attempts(tenant, params.id, { limit: Contract.pageLimit(limit, Webhooks.listLimit), ...(cursor === undefined ? {} : { before: cursor }) }), false)))
