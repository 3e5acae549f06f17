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
import { Context, Effect, Layer, Option, Schema } from "effect"

export const offloadThresholdBytes = 64 * 1024
export const defaultBucketName = "factline-payloads"

export class PayloadStoreUnavailable extends Schema.TaggedError<PayloadStoreUnavailable>()("PayloadStoreUnavailable", {
  message: Schema.String
}) {}

/** The reference is malformed, outside the tenant's prefix, or the object is gone: permanent. */
export class PayloadMissing extends Schema.TaggedError<PayloadMissing>()("PayloadMissing", {
  message: Schema.String
}) {}

export class PayloadStore extends Context.Service<PayloadStore, {
  readonly put: (tenantId: string, messageId: string, payload: unknown) => Effect.Effect<string, PayloadStoreUnavailable>
  readonly get: (tenantId: string, ref: string) => Effect.Effect<unknown, PayloadMissing | PayloadStoreUnavailable>
}>()("@factline/core/PayloadStore") {
  static readonly layer = (bucket: R2Bucket, bucketName: string = defaultBucketName) =>
    Layer.succeed(PayloadStore, make(bucket, bucketName))
}

const message = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

export const make = (bucket: R2Bucket, bucketName: string): PayloadStore["Service"] => ({
  put: (tenantId, messageId, payload) => {
    const key = `${tenantId}/${messageId}`
    return Effect.tryPromise({
      try: () => bucket.put(key, JSON.stringify(payload), { httpMetadata: { contentType: "application/json" } }),
      catch: (cause) => new PayloadStoreUnavailable({ message: message(cause) })
    }).pipe(Effect.as(`r2://${bucketName}/${key}`))
  },
  get: (tenantId, ref) => {
    const prefix = `r2://${bucketName}/${tenantId}/`
    if (!ref.startsWith(prefix)) {
      return Effect.fail(new PayloadMissing({ message: `payload_ref must start with ${prefix}` }))
    }
    const key = ref.slice(`r2://${bucketName}/`.length)
    return Effect.tryPromise({
      try: async () => {
        const object = await bucket.get(key)
        return object === null ? Option.none() : Option.some(await object.text())
      },
      catch: (cause) => new PayloadStoreUnavailable({ message: message(cause) })
    }).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new PayloadMissing({ message: `payload object ${ref} does not exist` })),
        onSome: (text) =>
          Effect.try({
            try: () => JSON.parse(text) as unknown,
            catch: () => new PayloadMissing({ message: `payload object ${ref} is not JSON` })
          })
      }))
    )
  }
})
