/**
 * Sending to a factline queue by name: the one place consumers reach queue
 * producer bindings (the live layer maps a queue name to its binding through
 * the policy table). One `sendBatch` call per `sendBatch` here: callers split
 * within the platform's limits (SendBatches). It does not retry; callers
 * decide what a failed send means.
 *
 * `route` names the queue a tenant's message of a grouped purpose goes to
 * (QueueGroups): the one place senders learn the deployment's group count.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Failure from "../failures/Failure.js"

export class QueueProducer extends Context.Service<QueueProducer, {
  readonly sendBatch: (queue: string, bodies: ReadonlyArray<unknown>, options?: { readonly delaySeconds?: number }) => Effect.Effect<void, Failure.Unavailable>
  /** The queue for `tenantId`'s message to `queue`: its group's queue for a grouped purpose, else `queue`. */
  readonly route: (queue: string, tenantId: string) => string
}>()("@factline/core/QueueProducer") {
  /**
   * `binding` maps a queue name to its producer binding (undefined: not bound in this Worker); `route` is the
   * composition's tenant routing (QueueGroups.route with the deployment's G; default: every queue as named).
   */
  static readonly layer = (binding: (queue: string) => Queue | undefined, route?: (queue: string, tenantId: string) => string) =>
    Layer.succeed(QueueProducer, make(binding, route))
}

export const make = (binding: (queue: string) => Queue | undefined, route: (queue: string, tenantId: string) => string = (queue) => queue): QueueProducer["Service"] => ({
  route,
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
