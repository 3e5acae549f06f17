/**
 * Sending to a factline queue by name: the one place consumers reach queue
 * producer bindings (the live layer maps a queue name to its binding through
 * the policy table). One `sendBatch` call per `sendBatch` here: callers split
 * within the platform's limits (SendBatches). It does not retry; callers
 * decide what a failed send means.
 */
import { Context, Effect, Layer } from "effect"
import * as Failure from "../failures/Failure.js"

export class QueueProducer extends Context.Service<QueueProducer, {
  readonly sendBatch: (queue: string, bodies: ReadonlyArray<unknown>, options?: { readonly delaySeconds?: number }) => Effect.Effect<void, Failure.Unavailable>
}>()("@factline/core/QueueProducer") {
  /** `binding` maps a queue name to its producer binding (undefined: not bound in this Worker). */
  static readonly layer = (binding: (queue: string) => Queue | undefined) => Layer.succeed(QueueProducer, make(binding))
}

export const make = (binding: (queue: string) => Queue | undefined): QueueProducer["Service"] => ({
  sendBatch: Effect.fn("QueueProducer.sendBatch")(function*(queue, bodies, options) {
    if (bodies.length === 0) return
    yield* Effect.tryPromise({
      try: async () => {
        const q = binding(queue)
        if (!q) throw new Error(`no producer binding for queue ${queue}`)
        await q.sendBatch(bodies.map((body) => ({ body, contentType: "json" as const })), options?.delaySeconds ? { delaySeconds: options.delaySeconds } : undefined)
      },
      catch: Failure.unavailable(`the ${queue} queue`)
    })
  })
})
