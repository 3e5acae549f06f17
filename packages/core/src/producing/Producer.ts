/**
 * The producer: how a service puts events on the shared events queue.
 *
 * `emit` / `emitBatch` take typed payloads for a registered message
 * definition; `send` takes raw envelope inputs (the HTTP ingest path). Either
 * way every message is validated against the registry before anything is sent
 * (all-or-nothing: one bad message sends none and every problem is listed),
 * producer-side defaults are filled (`message_id`, `created_at`,
 * `correlation_id` = the idempotency key, so producer retries stay in one
 * chain), payloads over 64 KiB are moved to R2 as `payload_ref`, and sends are
 * split into `sendBatch` calls within the queue's limits.
 */
import { Context, Effect, Layer, Result, Schema } from "effect"
import { type Envelope, EnvelopeInput, Issues } from "@factline/schemas"
import type { MessageDefinition } from "../routing/MessageDefinition.js"
import { PayloadStore, type PayloadStoreUnavailable, offloadThresholdBytes } from "./PayloadStore.js"
import * as SendBatches from "./SendBatches.js"

/** One or more messages failed validation; nothing was sent. */
export class InvalidMessages extends Schema.TaggedError<InvalidMessages>()("InvalidMessages", {
  problems: Schema.Array(Schema.Struct({ path: Schema.String, message: Schema.String }))
}) {}

export class QueueSendFailed extends Schema.TaggedError<QueueSendFailed>()("QueueSendFailed", {
  message: Schema.String
}) {}

export type ProducerError = InvalidMessages | QueueSendFailed | PayloadStoreUnavailable

export interface EmitOptions {
  readonly tenant_id: string
  readonly subject: string
  readonly idempotency_key: string
  readonly source?: string
  readonly correlation_id?: string
  readonly causation_id?: string
  readonly message_id?: string
  readonly created_at?: string
  /** Send an older version on purpose (defaults to the latest). */
  readonly schema_version?: number
}

export interface Emission<A = any> {
  readonly definition: MessageDefinition<string, A>
  readonly payload: A
  readonly options: EmitOptions
}

const decodeInput = Issues.decodeStrict(EnvelopeInput)

export class Producer extends Context.Service<Producer, {
  readonly send: (inputs: ReadonlyArray<unknown>, options?: { readonly pathPrefix?: string }) => Effect.Effect<ReadonlyArray<Envelope>, ProducerError>
  readonly emit: <A>(definition: MessageDefinition<string, A>, payload: A, options: EmitOptions) => Effect.Effect<Envelope, ProducerError>
  readonly emitBatch: (emissions: ReadonlyArray<Emission>) => Effect.Effect<ReadonlyArray<Envelope>, ProducerError>
}>()("@factline/core/Producer") {
  static readonly layer = (config: {
    readonly queue: Queue
    readonly definitions: ReadonlyMap<string, MessageDefinition>
    readonly defaultSource?: string
  }) =>
    Layer.effect(
      Producer,
      Effect.map(Effect.service(PayloadStore), (payloads) => make({ ...config, payloads }))
    )
}

export const make = (config: {
  readonly queue: Queue
  readonly definitions: ReadonlyMap<string, MessageDefinition>
  readonly payloads: PayloadStore["Service"]
  readonly defaultSource?: string
}): Producer["Service"] => {
  const validate = (inputs: ReadonlyArray<unknown>, prefix: string | undefined): Result.Result<Array<Envelope>, Array<Issues.Problem>> => {
    const problems: Array<Issues.Problem> = []
    const envelopes: Array<Envelope> = []
    const now = new Date().toISOString()
    const seen = new Map<string, number>()
    inputs.forEach((input, index) => {
      const path = prefix === undefined ? [] : [prefix, index]
      const decoded = decodeInput(input, path)
      if (Result.isFailure(decoded)) return void problems.push(...decoded.failure)
      const e = decoded.success
      const at = (field: string) => [...path, field].join(".")
      const definition = config.definitions.get(e.message_type)
      if (!definition) {
        problems.push({ path: at("message_type"), message: `unknown message type "${e.message_type}"` })
      } else if (e.payload !== undefined) {
        const valid = definition.validate(e.schema_version, e.payload, [...path, "payload"])
        if (Result.isFailure(valid)) {
          const p = valid.failure
          if (p._tag === "UnsupportedVersion") problems.push({ path: at("schema_version"), message: p.message })
          else problems.push(...p.problems)
        }
      }
      const duplicateOf = seen.get(`${e.tenant_id}\u0000${e.idempotency_key}`)
      if (duplicateOf !== undefined) {
        problems.push({ path: at("idempotency_key"), message: `duplicates the idempotency_key of message ${duplicateOf} in the same request` })
      }
      seen.set(`${e.tenant_id}\u0000${e.idempotency_key}`, index)
      const message_id = e.message_id ?? `msg_${crypto.randomUUID()}`
      envelopes.push({
        ...e,
        message_id,
        correlation_id: e.correlation_id ?? e.idempotency_key,
        created_at: e.created_at ?? now
      })
    })
    return problems.length > 0 ? Result.fail(problems) : Result.succeed(envelopes)
  }

  const offload = (envelope: Envelope) => {
    if (envelope.payload === undefined || SendBatches.sizeOf(envelope.payload) <= offloadThresholdBytes) return Effect.succeed(envelope)
    const { payload, ...rest } = envelope
    return Effect.map(config.payloads.put(envelope.tenant_id, envelope.message_id, payload), (payload_ref): Envelope => ({ ...rest, payload_ref }))
  }

  const send: Producer["Service"]["send"] = (inputs, options) =>
    Effect.gen(function*() {
      const validated = validate(inputs, options?.pathPrefix)
      if (Result.isFailure(validated)) return yield* new InvalidMessages({ problems: validated.failure })
      const envelopes = yield* Effect.forEach(validated.success, offload, { concurrency: 8 })
      yield* Effect.tryPromise({
        try: () => SendBatches.sendAll(config.queue, envelopes),
        catch: (cause) => new QueueSendFailed({ message: cause instanceof Error ? cause.message : String(cause) })
      })
      return envelopes
    })

  const toInput = (e: Emission) => ({
    schema_version: e.options.schema_version ?? e.definition.latestVersion,
    message_type: e.definition.messageType,
    source: e.options.source ?? config.defaultSource ?? "unknown",
    ...e.options,
    payload: e.payload
  })

  return {
    send,
    emit: (definition, payload, options) => Effect.map(send([toInput({ definition, payload, options })]), (all) => all[0]!),
    emitBatch: (emissions) => send(emissions.map(toInput), { pathPrefix: "events" })
  }
}
