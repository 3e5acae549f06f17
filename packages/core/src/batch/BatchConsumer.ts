/**
 * The consumer of `factline-batch`: bulk operations, one slice per message.
 *
 * A slice does its work and enqueues the next slice before it is acked, so an
 * operation is resumable from its last acked slice; slices are idempotent (the
 * inbox key is `batch_id:offset`), so a redelivered slice redoes nothing
 * visible. Today the operation is `rebuild`; import, export and reconcile are
 * refused as unsupported (dead-lettered with the reason), not silently dropped.
 */
import { Cause, Effect, Exit, Result } from "effect"
import { type BatchPayload, BatchPayload as BatchPayloadSchema, Envelope, Issues } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as Rebuild from "../projections/Rebuild.js"

export const make = (payload: BatchPayload): Envelope => ({
  schema_version: 1,
  message_type: `batch.${payload.operation}`,
  message_id: `msg_${crypto.randomUUID()}`,
  idempotency_key: `${payload.batch_id}:${payload.offset}`,
  correlation_id: payload.batch_id,
  tenant_id: Rebuild.platformTenant,
  subject: payload.batch_id,
  source: "factline-batch",
  created_at: new Date().toISOString(),
  payload
})

const decodeEnvelope = Issues.decodeStrict(Envelope)
const decodePayload = Issues.decodeStrict(BatchPayloadSchema)

export const decode = (body: unknown) => {
  const envelope = decodeEnvelope(body)
  if (Result.isFailure(envelope)) return Effect.fail<Consumer.Rejection>({ reason: "decode_error", error: Issues.render(envelope.failure) })
  const payload = decodePayload(envelope.success.payload, ["payload"])
  if (Result.isFailure(payload)) return Effect.fail<Consumer.Rejection>({ reason: "decode_error", error: Issues.render(payload.failure) })
  return Effect.succeed([{ key: `${envelope.success.tenant_id}/${envelope.success.idempotency_key}`, value: payload.success }])
}

export const process = (enqueue: (next: Envelope) => Promise<void>) =>
  (items: ReadonlyArray<{ readonly key: string; readonly value: BatchPayload }>) =>
    Effect.gen(function*() {
      const outcomes = new Map<string, Consumer.Outcome>()
      for (const { key, value } of items) {
        if (value.operation !== "rebuild") {
          outcomes.set(key, Consumer.permanent("permanent_failure", `batch operation "${value.operation}" is not supported yet`))
          continue
        }
        const exit = yield* Effect.exit(
          Effect.flatMap(Rebuild.step(value), (next) => (next ? Effect.promise(() => enqueue(make(next))) : Effect.void))
        )
        if (Exit.isSuccess(exit)) outcomes.set(key, Consumer.done)
        else {
          const error = Cause.squash(exit.cause) as { message?: string }
          outcomes.set(key, Consumer.transient(`rebuild step failed: ${error?.message ?? String(error)}`))
        }
      }
      return outcomes as ReadonlyMap<string, Consumer.Outcome>
    })

export const consume = (
  batch: MessageBatch<unknown>,
  enqueue: (next: Envelope) => Promise<void>,
  options: { readonly delayScale?: number; readonly log?: Consumer.LogLevel } = {}
) => Consumer.run({ policy: RetryPolicy.batch, decode, process: process(enqueue), delayScale: options.delayScale, log: options.log, inbox: true }, batch)
