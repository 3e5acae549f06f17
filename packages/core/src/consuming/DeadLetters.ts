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
import * as SendBatches from "../producing/SendBatches.js"
import * as Failure from "../failures/Failure.js"

export class DeadLetters extends Context.Service<DeadLetters, {
  readonly send: (queue: string, records: ReadonlyArray<DeadLetterRecord>) => Effect.Effect<void, Failure.Unavailable>
}>()("@factline/core/DeadLetters") {
  /** `queues` maps a source queue name to its DLQ producer binding. */
  static readonly layer = (queues: (queue: string) => Queue | undefined) => Layer.succeed(DeadLetters, make(queues))
}

/** Errors are kept short in the record: enough to act on, never a dump. */
export const maxErrorLength = 2_000

export const make = (queues: (queue: string) => Queue | undefined): DeadLetters["Service"] => ({
  send: Effect.fn("DeadLetters.send")(function*(queue, records) {
    if (records.length === 0) return
    yield* Effect.tryPromise({
      try: async () => {
        const dlq = queues(queue)
        if (!dlq) throw new Error(`no dead-letter queue binding for ${queue}`)
        await SendBatches.sendAll(dlq, records)
      },
      catch: Failure.unavailable("the dead-letter queue")
    })
  })
})
