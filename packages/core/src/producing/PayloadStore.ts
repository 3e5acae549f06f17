/**
 * Large payloads in R2: the producer puts a payload over 64 KiB there and sends
 * `payload_ref: "r2://<bucket>/<tenant>/<name>"` instead; the consumer loads it.
 * The caller chooses `name` and must make it unique per put (the producer uses
 * a random id): a client-chosen value such as `message_id` could be reused and
 * overwrite a payload another queued message still refers to.
 *
 * A reference must point inside the sending tenant's prefix: a message of
 * tenant A can never load tenant B's payload. The object is kept after use
 * (a retry or a DLQ replay needs it again); lifecycle rules on the bucket expire it.
 */
import { Context, Effect, Layer, Option } from "effect"
import { tenantKey } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import type { Bucket } from "../platform/Bindings.js"

export const offloadThresholdBytes = 64 * 1024

/**
 * Why a client's `payload_ref` is refused, on every ingest path (the HTTP edge, batch imports): a ref is
 * the producer's, under a key it chose; one from a client could name any object of the tenant's prefix
 * (an upload of any size), which the consumer would read whole, past every body and line limit.
 */
export const clientRefRefused = "is set by the producer only; send the payload inline"
export const defaultBucketName = "factline-payloads"

/** The reference is malformed, outside the tenant's prefix, or the object is gone: permanent. */
const missing = (message: string) => new Failure.PermanentError({ reason: "payload_missing", message })
const unavailable = Failure.unavailable("the payload store")

export class PayloadStore extends Context.Service<PayloadStore, {
  readonly put: (tenantId: string, messageId: string, payload: unknown) => Effect.Effect<string, Failure.Unavailable>
  /** The referenced payload; a reference outside the tenant's prefix, a missing object or one not JSON is a `payload_missing` `PermanentError`. */
  readonly get: (tenantId: string, ref: string) => Effect.Effect<unknown, Failure.PermanentError | Failure.Unavailable>
}>()("@factline/core/PayloadStore") {
  static readonly layer = (bucket: Bucket, bucketName: string = defaultBucketName) =>
    Layer.succeed(PayloadStore, make(bucket, bucketName))
}

export const make = (bucket: Bucket, bucketName: string): PayloadStore["Service"] => ({
  put: Effect.fn("PayloadStore.put")(function*(tenantId, messageId, payload) {
    const key = tenantKey(tenantId, messageId)
    return yield* Effect.tryPromise({
      try: () => bucket.put(key, JSON.stringify(payload), { httpMetadata: { contentType: "application/json" } }),
      catch: unavailable
    }).pipe(Effect.as(`r2://${bucketName}/${key}`))
  }),
  get: Effect.fn("PayloadStore.get")(function*(tenantId, ref) {
    const prefix = `r2://${bucketName}/${tenantId}/`
    if (!ref.startsWith(prefix)) {
      return yield* Effect.fail(missing(`payload_ref must start with ${prefix}`))
    }
    const key = ref.slice(`r2://${bucketName}/`.length)
    return yield* Effect.tryPromise({
      try: async () => {
        const object = await bucket.get(key)
        return object === null ? Option.none() : Option.some(await object.text())
      },
      catch: unavailable
    }).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(missing(`payload object ${ref} does not exist`)),
        onSome: (text) =>
          Effect.try({
            try: () => JSON.parse(text) as unknown,
            catch: () => missing(`payload object ${ref} is not JSON`)
          })
      }))
    )
  })
})
