/**
 * A fact as a message on `factline-projections` / `factline-fact-processing`:
 * an envelope whose `idempotency_key` is the fact id (so every consumer's
 * inbox dedupes re-sends), `message_type` is `fact.<type>`, and payload is
 * `{ fact, replayed? }`. Facts too large for a queue message travel as a
 * `payload_ref` to R2, like any other large payload.
 */
import { Effect, Result } from "effect"
import { Envelope, type Fact, FactPayload, Issues } from "@factline/schemas"
import type * as Consumer from "../consuming/Consumer.js"
import { PayloadStore } from "../producing/PayloadStore.js"

export const source = "factline-ledger"

export const make = (fact: Fact, options: { readonly replayed?: boolean } = {}): Envelope => ({
  schema_version: 1,
  message_type: `fact.${fact.type}`,
  message_id: `msg_${crypto.randomUUID()}`,
  idempotency_key: fact.fact_id,
  correlation_id: fact.correlation_id,
  causation_id: fact.causation_id,
  tenant_id: fact.tenant_id,
  subject: fact.stream,
  source,
  created_at: fact.created_at,
  payload: options.replayed ? { fact, replayed: true } : { fact }
})

const decodeEnvelope = Issues.decodeStrict(Envelope)
const decodePayload = Issues.decodeStrict(FactPayload)

/** The consumer side: envelope → (loaded) fact payload, keyed `tenant/fact_id`; failures are dead-letter reasons. */
export const decode = (body: unknown) =>
  Effect.gen(function*() {
    const envelope = decodeEnvelope(body)
    if (Result.isFailure(envelope)) {
      return yield* Effect.fail<Consumer.Rejection>({ reason: "decode_error", error: Issues.render(envelope.failure) })
    }
    const e = envelope.success
    let payload: unknown = e.payload
    if (e.payload_ref !== undefined) {
      const store = yield* PayloadStore
      payload = yield* store.get(e.tenant_id, e.payload_ref).pipe(
        Effect.mapError((error): Consumer.Rejection => ({ reason: "payload_missing", error: error.message, transient: error._tag === "PayloadStoreUnavailable" }))
      )
    }
    const decoded = decodePayload(payload, ["payload"])
    if (Result.isFailure(decoded)) {
      return yield* Effect.fail<Consumer.Rejection>({ reason: "decode_error", error: Issues.render(decoded.failure) })
    }
    if (decoded.success.fact.tenant_id !== e.tenant_id) {
      return yield* Effect.fail<Consumer.Rejection>({ reason: "decode_error", error: "payload.fact.tenant_id differs from the envelope's tenant_id" })
    }
    return { key: `${e.tenant_id}/${e.idempotency_key}`, value: decoded.success }
  })
