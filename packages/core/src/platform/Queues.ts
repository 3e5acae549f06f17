/**
 * The queues' one door: every message the platform sends — an accepted event, a relayed fact message, a dead
 * letter, a parked or replayed message, a webhook delivery, a batch chunk, and the ledger shard's outbox relay —
 * goes through `Queues.send`, to a queue by name. The door splits the messages into `sendBatch` calls within
 * Cloudflare Queues' limits (SendBatches: ≤ 100 messages and ≤ 256 KB a call; a message over 128 KB is refused
 * before any call is made), in order, and counts each message once its call resolved (`count`: the runtime's
 * tally behind `messages_sent_total`). When a call fails the calls after it are not made, and the failure
 * (`SendFailed`) says how many of the messages — the first ones, in order — are on the queue: what that means is
 * the caller's (a producer names the keys sent, a relay hands the rest to the shards' outbox). It does not
 * retry.
 *
 * `route` names the queue a tenant's message of a grouped purpose goes to (the composition's QueueGroups
 * routing); `metrics` reads a queue's backlog. The raw binding (`QueueBinding`: a Cloudflare `Queue` in a
 * Worker, the test kit's `MemoryQueue` in Node) lives here only, behind `QueueBindings`;
 * `npm run check:architecture` refuses a raw queue outside `platform/`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { FailureReason } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import * as SendBatches from "./SendBatches.js"

/** The part of a Cloudflare `Queue` the door uses: a Worker's queue producer binding is one, and so is the test kit's. */
export type QueueBinding = Pick<Queue, "sendBatch" | "metrics">

/** A queue's producer binding by queue name (platform queues, their group queues and DLQs); undefined when not bound. */
export class QueueBindings extends Context.Service<QueueBindings, {
  readonly queue: (name: string) => QueueBinding | undefined
}>()("@factline/core/QueueBindings") {}

/**
 * A send stopped at a failed `sendBatch` call (or before any, when a message is over the limit or the queue is not
 * bound): the first `sent` messages, in order, are on the queue, the others are not. 503 and retryable, as the queue
 * being down is.
 */
export class SendFailed extends Schema.TaggedError<SendFailed>()("QueueSendIncomplete", {
  queue: Schema.String,
  message: Schema.String,
  /** Messages on the queue: the first ones, in order. */
  sent: Schema.Number,
  /** Messages not sent. */
  notSent: Schema.Number,
  /** `sendBatch` calls made, the failed one included. */
  calls: Schema.Number
}) implements Failure.Failure {
  readonly [Failure.TypeId] = Failure.TypeId
  get status() { return 503 }
  get code() { return "unavailable" }
  get retryable() { return true }
  get reason(): FailureReason { return "retries_exhausted" }
  get publicMessage() { return `the ${this.queue} queue is unavailable, retry later` }
}

/** What a send did: messages on the queue and `sendBatch` calls made. */
export interface Sent {
  readonly messages: number
  readonly calls: number
}

export interface SendOptions {
  /** Seconds before delivery: one for every message, or each message's own (by index); 0 delivers at once. */
  readonly delaySeconds?: number | ((index: number) => number)
  /** Each message's size as `SendBatches.sizeOf` counts it (by index), where the caller measured it already. */
  readonly sizes?: ReadonlyArray<number>
}

export interface Options {
  /** The queue for `tenantId`'s message to `queue` (default: every queue as named). */
  readonly route?: (queue: string, tenantId: string) => string
  /** Told of each call that resolved: the queue sent to and its messages (the runtime's `messages_sent_total` tally). */
  readonly count?: (queue: string, messages: number) => void
}

export interface Shape {
  /** Sends `bodies` to `queue`, in order, in as few `sendBatch` calls as the limits allow; nothing for no bodies. */
  readonly send: (queue: string, bodies: ReadonlyArray<unknown>, options?: SendOptions) => Effect.Effect<Sent, SendFailed>
  /** The queue for `tenantId`'s message to `queue`: its group's queue for a grouped purpose, else `queue`. */
  readonly route: (queue: string, tenantId: string) => string
  /** Whether `queue` has a producer binding here. */
  readonly bound: (queue: string) => boolean
  /** The queue's backlog as its binding says it now; undefined when it is not bound or cannot say. */
  readonly metrics: (queue: string) => Effect.Effect<QueueMetrics | undefined>
}

export class Queues extends Context.Service<Queues, Shape>()("@factline/core/Queues") {
  /** The door over the bindings' `QueueBindings`, with the composition's routing and counting. */
  static readonly layer = (options?: Options) =>
    Layer.effect(Queues, Effect.map(Effect.service(QueueBindings), ({ queue }) => make(queue, options)))
  /** The door over `binding` directly (tests, a program that has its own binding). */
  static readonly over = (binding: (name: string) => QueueBinding | undefined, options?: Options) => Layer.succeed(Queues, make(binding, options))
}

const failed = (queue: string, message: string, sent: number, total: number, calls: number) =>
  new SendFailed({ queue, message, sent, notSent: total - sent, calls })

export const make = (binding: (name: string) => QueueBinding | undefined, options: Options = {}): Shape => {
  const count = options.count ?? (() => undefined)
  const send: Shape["send"] = Effect.fn("Queues.send")(function*(queue, bodies, sendOptions) {
    if (bodies.length === 0) return { messages: 0, calls: 0 }
    yield* Effect.annotateCurrentSpan({ queue, messages: bodies.length })
    const target = binding(queue)
    if (target === undefined) return yield* failed(queue, `no producer binding for queue ${queue}`, 0, bodies.length, 0)
    const sizes = sendOptions?.sizes ?? bodies.map(SendBatches.sizeOf)
    const over = sizes.findIndex((size) => size > SendBatches.maxMessageBytes)
    if (over >= 0) {
      return yield* failed(queue, `message ${over} is ${sizes[over]} bytes, over the queue's ${SendBatches.maxMessageBytes}-byte limit; nothing was sent`, 0, bodies.length, 0)
    }
    const delay = sendOptions?.delaySeconds
    const request = (index: number): MessageSendRequest => {
      const seconds = typeof delay === "function" ? delay(index) : 0
      return seconds > 0 ? { body: bodies[index], contentType: "json", delaySeconds: seconds } : { body: bodies[index], contentType: "json" }
    }
    const batchOptions = typeof delay === "number" && delay > 0 ? { delaySeconds: delay } : undefined
    const chunks = SendBatches.split(bodies.map((_, index) => index), (index) => bodies[index], (index) => sizes[index]!)
    let sent = 0
    let calls = 0
    for (const chunk of chunks) {
      calls++
      yield* Effect.tryPromise({
        try: () => target.sendBatch(chunk.map(request), batchOptions),
        catch: (cause) => failed(queue, cause instanceof Error ? cause.message : Failure.describe(cause), sent, bodies.length, calls)
      })
      sent += chunk.length
      count(queue, chunk.length)
    }
    return { messages: sent, calls }
  })
  return {
    send,
    route: options.route ?? ((queue) => queue),
    bound: (queue) => binding(queue) !== undefined,
    metrics: (queue) => {
      const target = binding(queue)
      return target === undefined ? Effect.succeed(undefined) : Effect.tryPromise(() => target.metrics()).pipe(Effect.orElseSucceed(() => undefined))
    }
  }
}
