/**
 * The consumer of `factline-events`: envelope in, facts in the ledger.
 *
 * Decoding is strict and total: an envelope that does not decode, an unknown
 * `message_type`, a `schema_version` newer than the definition, or a
 * `payload_ref` whose object is missing is dead-lettered at once with its
 * reason, without burning retries. Items are keyed `tenant/idempotency_key`:
 * two tenants may use the same key. No inbox: a redelivered message re-decides
 * the same facts, whose deterministic ids the ledger already holds, so it
 * appends nothing (and its stored facts are relayed again, harmlessly).
 */
import { Effect, Result } from "effect"
import { Envelope, Issues } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import { PayloadStore } from "../producing/PayloadStore.js"
import { dispatch } from "./Dispatch.js"
import { Registry, type Routed } from "../registry/Registry.js"

const decodeEnvelope = Issues.decodeStrict(Envelope)

export const itemKey = (tenantId: string, idempotencyKey: string) => `${tenantId}/${idempotencyKey}`

export const decode = (body: unknown) =>
  Effect.gen(function*() {
    const router = yield* Registry
    const envelope = decodeEnvelope(body)
    if (Result.isFailure(envelope)) {
      return yield* Effect.fail<Consumer.Rejection>({ reason: "decode_error", error: Issues.render(envelope.failure) })
    }
    const e = envelope.success
    if (!router.handlerFor(e.message_type)) {
      return yield* Effect.fail<Consumer.Rejection>({ reason: "unknown_message_type", error: `no handler is registered for message_type "${e.message_type}"` })
    }
    let payload: unknown = e.payload
    if (e.payload_ref !== undefined) {
      const store = yield* PayloadStore
      payload = yield* store.get(e.tenant_id, e.payload_ref).pipe(
        Effect.mapError((error): Consumer.Rejection =>
          error._tag === "PayloadMissing"
            ? { reason: "payload_missing", error: error.message }
            : { reason: "payload_missing", error: error.message, transient: true }
        )
      )
    }
    const routed = router.route(e, payload)
    if (Result.isFailure(routed)) {
      const f = routed.failure
      return yield* Effect.fail<Consumer.Rejection>({ reason: f.reason, error: `${f.message}: ${Issues.render(f.problems)}` })
    }
    return [{ key: itemKey(e.tenant_id, e.idempotency_key), value: routed.success as Routed }]
  })

export const consume = (batch: MessageBatch<unknown>, options: { readonly delayScale?: number; readonly log?: Consumer.LogLevel } = {}) =>
  Consumer.run({
    policy: RetryPolicy.events,
    decode,
    process: dispatch,
    delayScale: options.delayScale, log: options.log
  }, batch)
