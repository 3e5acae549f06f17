/**
 * The producer: how a service puts events on the shared events queue.
 *
 * `emit` / `emitBatch` take typed payloads for a registered message
 * definition; `send` takes raw envelope inputs (the HTTP ingest path). Either
 * way every message is validated against the registry before anything is sent
 * (all-or-nothing: one bad message sends none and every problem is listed),
 * producer-side defaults are filled (`message_id`, `created_at`,
 * `correlation_id` = the idempotency key, so producer retries stay in one
 * chain, and `traceparent`: a new W3C trace when none is given — the HTTP
 * edge passes the request's `traceparent` header as each event's default), payloads over 64 KiB are moved to R2 as `payload_ref` (under a key
 * the producer chooses; a client cannot set `payload_ref`), and sent through the
 * queues' door (Queues: split into `sendBatch` calls within the queue's limits,
 * counted) — one send per queue when the events queue is grouped per tenant
 * (QueueGroups), so a tenant's events land on its group's queue.
 *
 * The same idempotency key twice in one call: identical copies (same
 * `message_type`, `schema_version`, `subject`, `payload`) are collapsed and
 * sent once — the first copy is the one sent, later copies are `duplicate`;
 * differing copies are an `IdempotencyConflict` and nothing is sent.
 *
 * A delayed send (`delay_seconds`, 0 to 43,200: Cloudflare Queues' 12 hours; Delay.ts) is turned once, at
 * acceptance, into the envelope's `deliver_after`, and sent with the queue's `delaySeconds` for what is left;
 * `emitBatch` can stagger a batch (`{ stagger: { seconds, every } }`). The delay is not part of the payload
 * hash: a resend with another delay is the same event, not a conflict.
 *
 * `accept` is the HTTP edge: it also checks the keys against those accepted
 * before (`AcceptedKeys`, one D1 round trip) — another payload under an
 * accepted key is an `IdempotencyConflict`, the same payload is a replay,
 * marked `duplicate` and sent again (consumers dedupe by key; sending again is
 * what lets a client retry a request whose send failed after its keys were
 * recorded). Keys are recorded before the send, so a key whose request failed
 * to send stays bound to its payload: a retry with the same payload succeeds.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { Envelope } from "@factline/schemas"
import type { MessageDefinition } from "../definitions/MessageDefinition.js"
import * as Failure from "../failures/Failure.js"
import { AcceptedKeys, payloadHash } from "./AcceptedKeys.js"
import type * as KeyReceipts from "./KeyReceipts.js"
import { PayloadStore, offloadThresholdBytes } from "./PayloadStore.js"
import type * as KeptEvents from "./KeptEvents.js"
import * as Delay from "./Delay.js"
import { type QueueBinding, Queues } from "../platform/Queues.js"
import * as SendBatches from "../platform/SendBatches.js"
import * as Telemetry from "../platform/Telemetry.js"
import * as Time from "../platform/Time.js"
import { IdempotencyConflict, type Validated, validate } from "./ProducerInput.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as KeyStorage from "../personal/KeyStorage.js"
import * as Sealed from "./SealedPayloads.js"

export { IdempotencyConflict, invalidMessages } from "./ProducerInput.js"

/**
 * A `sendBatch` call failed (Queues.SendFailed). `sent` lists the idempotency keys of the messages on the
 * queue (those of the calls that succeeded before it); the others were not sent.
 */
export class QueueSendFailed extends Schema.TaggedError<QueueSendFailed>()("QueueSendFailed", {
  message: Schema.String,
  sent: Schema.Array(Schema.String),
  not_sent: Schema.Array(Schema.String)
}) implements Failure.Failure {
  readonly [Failure.TypeId] = Failure.TypeId
  get status() { return 503 }
  get code() { return "unavailable" }
  get retryable() { return true }
  get reason() { return "retries_exhausted" as const }
  get publicMessage() {
    return this.sent.length === 0
      ? "the events queue is unavailable; nothing was sent, retry later"
      : `the events queue failed after ${this.sent.length} event(s) were sent; retry the request (sending again is safe by idempotency key)`
  }
  get details() { return { sent: this.sent, not_sent: this.not_sent } }
}

export type ProducerError = Failure.InvalidInput | IdempotencyConflict | QueueSendFailed | Failure.Unavailable | Failure.Bug | Failure.Conflict

/** One input of an `accept` call: its envelope as sent, and whether it repeats an accepted (or earlier) copy. */
export interface AcceptedItem {
  readonly envelope: Envelope
  readonly duplicate: boolean
}

export interface EmitOptions {
  readonly tenant_id: string
  readonly subject: string
  readonly idempotency_key: string
  readonly source?: string
  readonly correlation_id?: string
  readonly causation_id?: string
  readonly message_id?: string
  readonly created_at?: string
  /** W3C trace context of the work this event belongs to (default: a new trace). */
  readonly traceparent?: string
  /** Send an older version on purpose (defaults to the latest). */
  readonly schema_version?: number
  /**
   * Deliver no sooner than this many seconds after `created_at` (which defaults to now; never later than now + the
   * delay): 0 to 43,200, Cloudflare Queues' 12 hours. Fixed once as the envelope's `deliver_after`, kept by every retry.
   */
  readonly delay_seconds?: number
}

export interface EmitBatchOptions {
  /** Spread the batch: event `i` waits `floor(i / every) * seconds` more than its own `delay_seconds` (seed 003's staggered sends). */
  readonly stagger?: Delay.Stagger
}

export interface Emission<A = any> {
  readonly definition: MessageDefinition<string, A>
  readonly payload: A
  readonly options: EmitOptions
}


export class Producer extends Context.Service<Producer, {
  readonly send: (inputs: ReadonlyArray<unknown>, options?: { readonly pathPrefix?: string }) => Effect.Effect<ReadonlyArray<Envelope>, ProducerError>
  readonly emit: <A>(definition: MessageDefinition<string, A>, payload: A, options: EmitOptions) => Effect.Effect<Envelope, ProducerError>
  readonly emitBatch: (emissions: ReadonlyArray<Emission>, options?: EmitBatchOptions) => Effect.Effect<ReadonlyArray<Envelope>, ProducerError>
  /** The HTTP edge: `send`, plus the check of every key against those accepted before (one D1 round trip). */
  readonly accept: (
    inputs: ReadonlyArray<unknown>,
    options?: { readonly pathPrefix?: string }
  ) => Effect.Effect<ReadonlyArray<AcceptedItem>, ProducerError, AcceptedKeys>
}>()("@factline/core/Producer") {
  static readonly layer = (config: {
    /** The events queue's name: a tenant's events go to its group's queue (Queues.route). */
    readonly queue: string
    readonly definitions: ReadonlyMap<string, MessageDefinition>
    readonly defaultSource?: string
    /** Development only: keeps each request's accepted envelopes (KeptEvents) before they are sent. */
    readonly keep?: KeptEvents.Keep
    /** The edge's key receipts (KeyReceipts.ts): what `accept` stamps on each envelope whose key it bound. */
    readonly receipts?: KeyReceipts.Shape
  }) =>
    Layer.effect(
      Producer,
      Effect.map(Effect.all([Effect.service(PayloadStore), Effect.service(Queues), Effect.service(KeyRing)]), ([payloads, queues, keyRing]) => make({ ...config, payloads, queues, keyRing }))
    )
  /**
   * A service of its own that emits (not the platform's Worker): the producer over its events queue binding,
   * behind the queues' door of its own (split within the limits; nothing counted: the platform's
   * `messages_sent_total` counts what the platform sends).
   */
  static readonly over = (binding: QueueBinding, config: {
    readonly definitions: ReadonlyMap<string, MessageDefinition>
    readonly defaultSource?: string
    /**
     * Where personal data is sealed (required when a definition declares personal data): the platform's LedgerShard
     * namespace (its tenants' key stores) and its `FACTLINE_SECRETS_KEY`, bound in this service too.
     */
    readonly keys?: { readonly namespace: KeyStorage.KeyStoreNamespace; readonly secretsKey: string | undefined }
  }) => {
    const personal = [...config.definitions.values()].filter((d) => d.personalData !== undefined).map((d) => d.messageType)
    if (personal.length > 0 && config.keys === undefined) {
      throw new Error(`Producer.over: ${personal.join(", ")} declare(s) personal data, which is sealed before it is sent: give \`keys\` (the platform's LedgerShard namespace and FACTLINE_SECRETS_KEY)`)
    }
    const keyRing = KeyRing.layer({ secretsKey: config.keys?.secretsKey }).pipe(Layer.provide(KeyStorage.KeyStores.layer(config.keys?.namespace ?? Sealed.noKeyStores)))
    return Producer.layer({ ...config, queue: ownQueue }).pipe(Layer.provide(Layer.merge(Queues.over((name) => (name === ownQueue ? binding : undefined)), keyRing)))
  }
}

/** The name the door of `Producer.over` gives the one queue it is handed (in its failures' messages). */
const ownQueue = "events"

interface Config {
  readonly queue: string
  readonly definitions: ReadonlyMap<string, MessageDefinition>
  readonly payloads: PayloadStore["Service"]
  readonly queues: Queues["Service"]
  readonly keyRing: KeyRing["Service"]
  readonly defaultSource?: string
  readonly keep?: KeptEvents.Keep
  readonly receipts?: KeyReceipts.Shape
}

const offload = (config: Config, envelope: Envelope) => {
  if (envelope.payload === undefined || SendBatches.sizeOf(envelope.payload) <= offloadThresholdBytes) return Effect.succeed(envelope)
  const { payload, ...rest } = envelope
  // A fresh name per put: a client's message_id (reusable) never decides the R2 key, so no send overwrites another's payload.
  return Effect.map(config.payloads.put(envelope.tenant_id, `p_${crypto.randomUUID()}`, payload), (payload_ref): Envelope => ({ ...rest, payload_ref }))
}

/** Offloads and sends the first copy of each key (each held back until its `deliver_after`); on a failed call, says which keys were already sent. */
const sendFirstCopies = (config: Config, validated: Validated, now: string) =>
  Effect.gen(function*() {
    const firstIndexes = validated.firstOf.filter((first, index) => first === index)
    const envelopes = yield* Effect.forEach(firstIndexes, (index) => offload(config, validated.envelopes[index]!), { concurrency: 8 })
    const sent: Array<string> = []
    // One run of sends per queue (a tenant's events go to its group's queue), in input order within it.
    const byQueue = new Map<string, Array<Envelope>>()
    for (const e of envelopes) {
      const queue = config.queues.route(config.queue, e.tenant_id)
      const list = byQueue.get(queue)
      if (list) list.push(e)
      else byQueue.set(queue, [e])
    }
    const runs = [...byQueue]
    const keysOf = (list: ReadonlyArray<Envelope>) => list.map((e) => e.idempotency_key)
    const nowMs = Date.parse(now)
    for (let i = 0; i < runs.length; i++) {
      const [queue, list] = runs[i]!
      yield* config.queues.send(queue, list, { delaySeconds: (index) => Delay.secondsUntil(list[index]!.deliver_after, nowMs) }).pipe(
        Effect.mapError((failure) =>
          new QueueSendFailed({
            message: failure.message,
            sent: [...sent, ...keysOf(list.slice(0, failure.sent))],
            not_sent: [...keysOf(list.slice(failure.sent)), ...runs.slice(i + 1).flatMap(([, rest]) => keysOf(rest))]
          }))
      )
      sent.push(...keysOf(list))
    }
    const byFirst = new Map(firstIndexes.map((index, i) => [index, envelopes[i]!]))
    return validated.firstOf.map((first) => byFirst.get(first)!)
  })

const acceptOf = (config: Config): Producer["Service"]["accept"] => Effect.fn("Producer.accept")(function*(inputs, options) {
  const now = yield* Time.now
  const checked = validate(config.definitions, inputs, options?.pathPrefix, now, yield* Telemetry.sender)
  if (Result.isFailure(checked)) return yield* checked.failure
  const validated = { success: yield* Sealed.sealAll(config.keyRing, config.definitions, checked.success, options?.pathPrefix) }
  const { envelopes, firstOf } = validated.success
  const at = (index: number) => [...(options?.pathPrefix === undefined ? [] : [options.pathPrefix, index]), "idempotency_key"].join(".")
  const firsts = envelopes.map((e, index) => ({ e, index })).filter(({ index }) => firstOf[index] === index)
  const hashes = yield* Effect.promise(() => Promise.all(firsts.map(({ e }) => payloadHash(e))))
  const byTenant = new Map<string, Array<{ index: number; entry: { idempotency_key: string; payload_hash: string; message_type: string; subject: string } }>>()
  firsts.forEach(({ e, index }, i) => {
    const list = byTenant.get(e.tenant_id) ?? []
    list.push({ index, entry: { idempotency_key: e.idempotency_key, payload_hash: hashes[i]!, message_type: e.message_type, subject: e.subject } })
    byTenant.set(e.tenant_id, list)
  })
  const keys = yield* AcceptedKeys
  const replayed = new Set<number>()
  const conflicts: Array<IdempotencyConflict["conflicts"][number]> = []
  for (const [tenantId, list] of byTenant) {
    const stored = yield* keys.record(tenantId, list.map((l) => l.entry), now)
    for (const { index, entry } of list) {
      const hash = stored.get(entry.idempotency_key)
      if (hash === undefined) continue
      if (hash === entry.payload_hash) replayed.add(index)
      else {
        const paths = envelopes.map((_, i) => i).filter((i) => firstOf[i] === index).map(at)
        conflicts.push({ idempotency_key: entry.idempotency_key, reason: "accepted_before", paths })
      }
    }
  }
  if (conflicts.length > 0) return yield* new IdempotencyConflict({ conflicts })
  // Every key is bound to its payload now: each first copy carries the receipt that spares the consumer its claim.
  const receipts = config.receipts
  if (receipts !== undefined) {
    const signed = yield* Effect.promise(() =>
      Promise.all(firsts.map(({ e }, i) => receipts.sign({ tenant_id: e.tenant_id, idempotency_key: e.idempotency_key, payload_hash: hashes[i]! }))))
    firsts.forEach(({ e, index }, i) => {
      const receipt = signed[i]
      if (receipt !== undefined) envelopes[index] = { ...e, key_receipt: receipt }
    })
  }
  if (config.keep !== undefined) yield* config.keep(firsts.map(({ e }) => e), now)
  const sent = yield* sendFirstCopies(config, validated.success, now)
  return sent.map((envelope, index): AcceptedItem => ({ envelope, duplicate: firstOf[index] !== index || replayed.has(index) }))
})

export const make = (config: Config): Producer["Service"] => {
  const send: Producer["Service"]["send"] = Effect.fn("Producer.send")(function*(inputs, options) {
    const now = yield* Time.now
    const validated = validate(config.definitions, inputs, options?.pathPrefix, now, yield* Telemetry.sender)
    if (Result.isFailure(validated)) return yield* validated.failure
    return yield* sendFirstCopies(config, yield* Sealed.sealAll(config.keyRing, config.definitions, validated.success, options?.pathPrefix), now)
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
    accept: acceptOf(config),
    emit: Effect.fn("Producer.emit")(function*(definition, payload, options) {
      return yield* Effect.map(send([toInput({ definition, payload, options })]), (all) => all[0]!)
    }),
    emitBatch: Effect.fn("Producer.emitBatch")(function*(emissions, options) {
      const stagger = options?.stagger
      const inputs = stagger === undefined
        ? emissions.map(toInput)
        : emissions.map((e, i) => ({ ...toInput(e), delay_seconds: (e.options.delay_seconds ?? 0) + Delay.staggerOf(stagger, i) }))
      return yield* send(inputs, { pathPrefix: "events" })
    })
  }
}
