/**
 * Large payloads in R2: the producer puts a payload over 64 KiB there and sends
 * `payload_ref: "r2://<bucket>/_payloads/<tenant>/<name>"` instead; the consumer
 * loads it (the relay does the same for a fact too large to share a message).
 * The caller chooses `name` and must make it unique per put (the producer uses
 * a random id): a client-chosen value such as `message_id` could be reused and
 * overwrite a payload another queued message still refers to.
 *
 * Every payload lives under one prefix, `_payloads/`, apart from what the bucket
 * keeps per tenant (`<tenant>/uploads/…`, `<tenant>/batches/…` and the facts
 * archive `<tenant>/archive/facts/…`, which must never expire): R2 lifecycle rules
 * match by key prefix only, and `factline deploy` sets one that expires
 * `_payloads/` after the retention (docs/deploy.md). A tenant id starts with a
 * letter or digit, so no tenant's own prefix can fall under `_payloads/`.
 *
 * A reference must point inside the sending tenant's payloads: a message of
 * tenant A can never load tenant B's payload. The object is kept after use
 * (a retry or a DLQ replay needs it again) until the lifecycle rule expires it.
 * References written before the `_payloads/` layout (`<bucket>/<tenant>/<name>`)
 * still load, under the same tenant check.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { tenantKey } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import type { Storage } from "../platform/Storage.js"
import * as ObjectLayout from "../platform/ObjectLayout.js"

export const offloadThresholdBytes = 64 * 1024

/**
 * Why a client's `payload_ref` is refused, on every ingest path (the HTTP edge, batch imports): a ref is
 * the producer's, under a key it chose; one from a client could name any object of the tenant's prefix
 * (an upload of any size), which the consumer would read whole, past every body and line limit.
 */
export const clientRefRefused = "is set by the producer only; send the payload inline"
export const defaultBucketName = "factline-payloads"

/** The key prefix every offloaded payload is stored under (the one a lifecycle rule expires). */
export const payloadsPrefix = ObjectLayout.payloadsPrefix

/** The R2 key of a tenant's payload `name`: `_payloads/<tenant>/<name>`. */
export const payloadKey = (tenantId: string, name: string): string => `${payloadsPrefix}${tenantKey(tenantId, name)}`

/** What the bucket keeps per tenant beside payloads (uploads, batch files, the facts archive): never a payload. */
const tenantFolders = ["uploads/", "batches/", "archive/"]

/**
 * The R2 key a reference names, when it is one of `tenantId`'s payloads: under `_payloads/<tenant>/`, or a
 * reference from before that layout under `<tenant>/` — but never another tenant's, and never the tenant's
 * uploads, batch files or archive (only the producer and the relay write references, and never to those).
 */
export const keyOf = (bucketName: string, tenantId: string, ref: string): string | undefined => {
  const base = `r2://${bucketName}/`
  if (!ref.startsWith(base)) return undefined
  const key = ref.slice(base.length)
  if (key.startsWith(payloadsPrefix)) return key.startsWith(payloadKey(tenantId, "")) ? key : undefined
  const own = tenantKey(tenantId, "")
  if (!key.startsWith(own)) return undefined
  const name = key.slice(own.length)
  return tenantFolders.some((folder) => name.startsWith(folder)) ? undefined : key
}

/** The reference is malformed, outside the tenant's prefix, or the object is gone: permanent. */
const missing = (message: string) => new Failure.PermanentError({ reason: "payload_missing", message })

export class PayloadStore extends Context.Service<PayloadStore, {
  readonly put: (tenantId: string, messageId: string, payload: unknown) => Effect.Effect<string, Failure.Unavailable>
  /** The referenced payload; a reference outside the tenant's prefix, a missing object or one not JSON is a `payload_missing` `PermanentError`. */
  readonly get: (tenantId: string, ref: string) => Effect.Effect<unknown, Failure.PermanentError | Failure.Unavailable>
}>()("@factline/core/PayloadStore") {
  /** Over the payload bucket's door (`PayloadBucket`). */
  static readonly layer = (storage: Storage, bucketName: string = defaultBucketName) =>
    Layer.succeed(PayloadStore, make(storage, bucketName))
}

export const make = (storage: Storage, bucketName: string): PayloadStore["Service"] => ({
  put: Effect.fn("PayloadStore.put")(function*(tenantId, messageId, payload) {
    const key = payloadKey(tenantId, messageId)
    yield* storage.put(key, JSON.stringify(payload), "application/json")
    return `r2://${bucketName}/${key}`
  }),
  get: Effect.fn("PayloadStore.get")(function*(tenantId, ref) {
    const key = keyOf(bucketName, tenantId, ref)
    if (key === undefined) {
      return yield* Effect.fail(missing(`payload_ref must start with r2://${bucketName}/${payloadKey(tenantId, "")}`))
    }
    const text = yield* storage.text(key)
    if (text === undefined) return yield* Effect.fail(missing(`payload object ${ref} does not exist`))
    return yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: () => missing(`payload object ${ref} is not JSON`)
    })
  })
})
