/**
 * Sending a failed message to its queue's dead-letter queue, with the failure context.
 *
 * The consumer runtime calls this instead of letting the platform dead-letter
 * a message silently: the record keeps the original body untouched and says
 * why (`reason`, `last_error`, `attempts`, first/last attempt, `queue`). Only
 * after the send resolved is the original acked; if it fails, the message is
 * retried instead, so nothing is lost.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { DeadLetterRecord } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import { Queues, type SendFailed } from "../platform/Queues.js"
import * as RetryPolicy from "./RetryPolicy.js"

export class DeadLetters extends Context.Service<DeadLetters, {
  /** Sends `records` of messages that failed on `queue` (a physical queue: a group queue too) to its purpose's DLQ. */
  readonly send: (queue: string, records: ReadonlyArray<DeadLetterRecord>) => Effect.Effect<void, Failure.Unavailable | SendFailed>
}>()("@factline/core/DeadLetters") {
  /** Over the queues' door. */
  static readonly layer = Layer.effect(DeadLetters, Effect.map(Effect.service(Queues), (queues) => make(queues)))
}

/** Errors are kept short in the record: enough to act on, never a dump. */
export const maxErrorLength = 2_000

export const make = (queues: Queues["Service"]): DeadLetters["Service"] => ({
  send: Effect.fn("DeadLetters.send")(function*(queue, records) {
    if (records.length === 0) return
    const deadLetterQueue = RetryPolicy.forQueue(queue)?.deadLetterQueue
    if (deadLetterQueue === undefined) return yield* new Failure.Unavailable({ service: "the dead-letter queue", message: `no dead-letter queue for ${queue}` })
    yield* queues.send(deadLetterQueue, records)
  })
})
