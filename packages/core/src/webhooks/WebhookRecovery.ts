/**
 * Sending an endpoint's failed deliveries again (`POST /v1/webhooks/endpoints/:id/recover`): the deliveries that
 * failed since a time are marked pending again (WebhookStore.recover) and their stored messages sent to the
 * webhooks queue, split by the queue's limits. A delivery that succeeded meanwhile is not sent again (the store
 * only returns failed ones); one sent twice is deduped by its delivery id downstream. It does not touch other
 * endpoints' deliveries, nor deliveries still being retried.
 */
import * as Effect from "effect/Effect"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import { Queues } from "../platform/Queues.js"
import { WebhookStore } from "./WebhookStore.js"

/** Recovers the tenant's endpoint `id`'s deliveries failed since `since` (ISO 8601); how many were sent again. */
export const recover = Effect.fn("WebhookRecovery.recover")(function*(tenantId: string, id: string, since: string) {
  const messages = yield* (yield* WebhookStore).recover(tenantId, id, since)
  yield* (yield* Queues).send(RetryPolicy.webhooks.queue, messages)
  return messages.length
})
