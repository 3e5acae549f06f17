/**
 * The consumer of `factline-batch`: bulk operations, one chunk per message.
 *
 * A chunk does its work and enqueues the next chunk before it is acked, so an
 * operation is resumable from its last acked chunk; chunks are idempotent (the
 * inbox key is `batch_id:offset`, the chunk's number for an import), so a
 * redelivered chunk redoes nothing visible. Operations: `rebuild`
 * (Rebuild.ts), `import` (Import.ts), `export` (Export.ts), `reconcile`
 * (Reconcile.ts), `move` (placement/Move.ts: a tenant between read
 * databases; its steps may ask to run later, and the next message is sent
 * with that delay) and `delete_tenant` (placement/Deletion.ts: a departed
 * tenant's whole data, run as a move is) and `erase` (subjects/Erasure.ts: a
 * data subject's personal data, on its tenant's read database, run the same way).
 *
 * A chunk that fails on its last allowed attempt ends its job `failed` with
 * the error (and a rebuild's shadow table dropped) before it is dead-lettered:
 * a job that cannot finish never stays `running`, nor blocks the next rebuild.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import { type BatchPayload, BatchPayload as BatchPayloadSchema, Envelope, Issues, tenantKey } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as Deadline from "../consuming/Deadline.js"
import * as Failure from "../failures/Failure.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import { Queues } from "../platform/Queues.js"
import * as Rebuild from "../projections/Rebuild.js"
import * as BatchJobs from "./BatchJobs.js"
import * as Export from "./Export.js"
import * as Import from "./Import.js"
import * as Reconcile from "./Reconcile.js"
import * as Time from "../platform/Time.js"
import * as Placement from "../placement/Placement.js"
import * as Move from "../placement/Move.js"
import * as Split from "../placement/Split.js"
import * as Deletion from "../placement/Deletion.js"
import * as Reshard from "../placement/Reshard.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Erasure from "../subjects/Erasure.js"

/** The chunk message, created now; `tenantId` is the job's (a rebuild's is the platform's). */
export const make = (payload: BatchPayload, tenantId: string = Rebuild.platformTenant): Effect.Effect<Envelope> =>
  Effect.map(Time.now, (now) => message(payload, tenantId, now))

/** The chunk message created at `createdAt`. */
export const message = (payload: BatchPayload, tenantId: string, createdAt: string): Envelope => ({
  schema_version: 1,
  message_type: `batch.${payload.operation}`,
  message_id: `msg_${crypto.randomUUID()}`,
  idempotency_key: `${payload.batch_id}:${payload.offset}`,
  correlation_id: payload.batch_id,
  tenant_id: tenantId,
  subject: payload.batch_id,
  source: "factline-batch",
  created_at: createdAt,
  payload
})

const decodeEnvelope = Issues.decodeStrict(Envelope)
const decodePayload = Issues.decodeStrict(BatchPayloadSchema)

/** A chunk to run, its tenant, and whether this delivery is its last allowed attempt. */
export interface Chunk {
  readonly payload: BatchPayload
  readonly tenantId: string
  readonly last: boolean
}

export const decode = (body: unknown, delivery: Consumer.Delivery) => {
  const envelope = decodeEnvelope(body)
  if (Result.isFailure(envelope)) return Effect.fail(new Failure.PermanentError({ reason: "decode_error", message: Issues.render(envelope.failure) }))
  const payload = decodePayload(envelope.success.payload, ["payload"])
  if (Result.isFailure(payload)) return Effect.fail(new Failure.PermanentError({ reason: "decode_error", message: Issues.render(payload.failure) }))
  const value: Chunk = { payload: payload.success, tenantId: envelope.success.tenant_id, last: delivery.last }
  return Effect.succeed([{ key: tenantKey(envelope.success.tenant_id, envelope.success.idempotency_key), value }])
}

const messageOf = (cause: Cause.Cause<unknown>) => {
  const error = Cause.squash(cause) as { message?: string } | undefined
  return error?.message ?? String(error)
}

/**
 * Ends the operation of `payload` (of `tenantId`'s) `failed` with `error`, unless it has ended already: a chunk
 * that will not be retried again, or a first chunk the queue refused (BatchStart.ts). A rebuild's shadow tables and
 * a reconcile's shadow are dropped; a move releases the tenant's writes.
 */
export const fail = (payload: BatchPayload, tenantId: string, error: string) =>
  Effect.gen(function*() {
    const now = yield* Time.now
    if (payload.operation === "rebuild") return yield* Rebuild.fail(payload.batch_id, error, now)
    if (payload.operation === "move") return yield* Move.fail(payload.batch_id, error, now)
    if (payload.operation === "delete_tenant") return yield* Deletion.fail(payload.batch_id, error, now)
    if (payload.operation === "reshard") return yield* Reshard.fail(payload.batch_id, error, now)
    if (payload.operation === "erase") return yield* Placement.writing(tenantId)(Erasure.fail(payload.batch_id, error, now))
    yield* Placement.writing(tenantId)(Effect.gen(function*() {
      yield* BatchJobs.fail(payload.batch_id, error, now)
      const job = yield* BatchJobs.find(payload.batch_id)
      if (job?.operation === "reconcile") yield* Reconcile.dropShadow(job)
    }))
  })

/**
 * Runs one chunk; returns the next chunk, if any. A rebuild spans every read database (Rebuild places each
 * tenant's facts); the other operations are one tenant's, on its read database.
 */
const stepOf = (payload: BatchPayload, tenantId: string) =>
  Effect.gen(function*() {
    if (payload.operation === "rebuild") return yield* Rebuild.step(payload)
    if (payload.operation === "move") return yield* Split.step(payload)
    if (payload.operation === "delete_tenant") return yield* Deletion.step(payload, (yield* KeyRing).cacheBoundMs)
    if (payload.operation === "reshard") return yield* Reshard.step(payload)
    const onTenant = Placement.writing(tenantId)
    if (payload.operation === "export") return yield* onTenant(Export.step(payload))
    if (payload.operation === "reconcile") return yield* onTenant(Reconcile.step(payload))
    if (payload.operation === "erase") return yield* onTenant(Erasure.step(payload))
    return yield* onTenant(Import.step(payload))
  })

/**
 * Chunks one message runs in a row before it enqueues the next: every hop through the queue waits for
 * its batch (up to `max_batch_timeout`, 10 s for factline-batch), so one chunk per message would make an
 * import of 10,000 lines wait 100 batch timeouts. A count, not a time budget: a redelivered message
 * stops at the same chunk, so its next message has the same key (`batch_id:chunk`) and the inbox
 * dedupes it. Chunks already recorded are skipped cheaply (one read each). A rebuild keeps one slice
 * per message (25 shards, each possibly large).
 */
export const chunksPerMessage = 10

const runMessage = (first: BatchPayload, tenantId: string) =>
  Effect.gen(function*() {
    const limit = first.operation === "rebuild" ? 1 : chunksPerMessage
    let payload = first
    for (let ran = 1; ; ran++) {
      const next = yield* stepOf(payload, tenantId)
      if (next === undefined) return undefined
      // A step that asks to wait ends this message: the next one is sent with the delay.
      if ("delaySeconds" in next) {
        if (next.delaySeconds > 0 || ran >= limit) return next
        payload = next.payload
        continue
      }
      if (ran >= limit) return { payload: next, delaySeconds: 0 } satisfies Move.Next
      payload = next
    }
  })

/**
 * Sends a chunk to the batch queue through the one queue door (after `delaySeconds`): an operation's first
 * chunk, sent by whoever starts it, and each next one. `tenantId` as `make`'s.
 */
export const send = (payload: BatchPayload, tenantId?: string, delaySeconds = 0) =>
  Effect.flatMap(make(payload, tenantId), (message) =>
    Effect.flatMap(Effect.service(Queues), (queues) => queues.send(RetryPolicy.batch.queue, [message], { delaySeconds })))

export const process = Effect.fn("BatchConsumer.process")(function*(items: ReadonlyArray<{ readonly key: string; readonly value: Chunk }>) {
  const outcomes = new Map<string, Consumer.Outcome>()
  for (const [at, { key, value }] of items.entries()) {
    // A message is the unit of the invocation's time budget (Deadline): the first always runs; the next starts only
    // while the budget lasts, else it is handed back unstarted. Not between a message's chunks: a message that
    // stops where a redelivery of it stops keeps its next chunk's key, which the inbox dedupes.
    if (at > 0 && (yield* Deadline.passed)) {
      outcomes.set(key, Deadline.handedBack)
      continue
    }
    const { payload } = value
    const exit = yield* Effect.exit(
      Effect.flatMap(runMessage(payload, value.tenantId), (next) => (next ? send(next.payload, value.tenantId, next.delaySeconds) : Effect.void))
    )
    if (Exit.isSuccess(exit)) {
      outcomes.set(key, Consumer.done)
      continue
    }
    const error = `${payload.operation} chunk ${payload.offset} failed: ${messageOf(exit.cause)}`
    const permanent = !Failure.classify(exit.cause).retryable
    if (permanent || value.last) {
      // Recorded before the message settles; if even that fails, the chunk is retried (or dead-lettered with the error).
      const failed = yield* Effect.exit(fail(value.payload, value.tenantId, error))
      if (Exit.isFailure(failed)) {
        outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: `${error}; the job could not be marked failed: ${messageOf(failed.cause)}` })))
        continue
      }
    }
    outcomes.set(key, permanent ? Consumer.failed(new Failure.PermanentError({ reason: "permanent_failure", message: error })) : Consumer.failed(new Failure.TransientError({ message: error })))
  }
  return outcomes as ReadonlyMap<string, Consumer.Outcome>
})

export const consume = Effect.fn("BatchConsumer.consume")(function*(
  batch: MessageBatch<unknown>,
  options: Consumer.Options = {}
) {
  return yield* Consumer.run({ policy: RetryPolicy.batch, decode, process, delayScale: options.delayScale, log: options.log, runs: options.runs, inbox: true }, batch)
})
