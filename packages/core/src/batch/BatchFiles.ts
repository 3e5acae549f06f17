/**
 * The objects of batch jobs in R2 (the payload bucket): inputs (an inline
 * import written as NDJSON, an uploaded manifest) and outputs, each under its
 * tenant's prefix (`<tenant>/batches/…`, `<tenant>/uploads/…`). Reads are by
 * byte range: a job never loads a whole input. Downloads and uploads stream at
 * the HTTP edge; this service is what the batch consumer uses.
 */
import { Context, Effect, Layer } from "effect"
import * as Failure from "../failures/Failure.js"

export interface Range {
  readonly bytes: Uint8Array
  /** The object's whole size. */
  readonly size: number
}

export class BatchFiles extends Context.Service<BatchFiles, {
  readonly put: (key: string, body: string) => Effect.Effect<void, Failure.Unavailable>
  /** Up to `length` bytes from `offset`, or undefined when the object does not exist. */
  readonly read: (key: string, offset: number, length: number) => Effect.Effect<Range | undefined, Failure.Unavailable>
}>()("@factline/core/BatchFiles") {
  static readonly layer = (bucket: R2Bucket) => Layer.succeed(BatchFiles, make(bucket))
}

const unavailable = (cause: unknown) => new Failure.Unavailable({ service: "the payload store", message: cause instanceof Error ? cause.message : String(cause) })

export const make = (bucket: R2Bucket): BatchFiles["Service"] => ({
  put: (key, body) =>
    Effect.tryPromise({ try: () => bucket.put(key, body, { httpMetadata: { contentType: "application/x-ndjson" } }), catch: unavailable }).pipe(Effect.asVoid),
  read: (key, offset, length) =>
    Effect.tryPromise({
      try: async () => {
        const head = await bucket.head(key)
        if (head === null) return undefined
        if (offset >= head.size) return { bytes: new Uint8Array(0), size: head.size }
        const object = await bucket.get(key, { range: { offset, length: Math.min(length, head.size - offset) } })
        if (object === null) return undefined
        return { bytes: new Uint8Array(await object.arrayBuffer()), size: head.size }
      },
      catch: unavailable
    })
})
