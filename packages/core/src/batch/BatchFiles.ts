/**
 * The objects of batch jobs in R2 (the payload bucket): inputs (an inline
 * import written as NDJSON, an uploaded manifest) and outputs, each under its
 * tenant's prefix (`<tenant>/batches/…`, `<tenant>/uploads/…`). Reads are by
 * byte range: a job never loads a whole input. Downloads and uploads stream
 * (`stream`, `upload`): the HTTP edge passes bodies through, never buffering them.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Failure from "../failures/Failure.js"
import type { Bucket } from "../platform/Bindings.js"

export interface Range {
  readonly bytes: Uint8Array
  /** The object's whole size. */
  readonly size: number
}

export class BatchFiles extends Context.Service<BatchFiles, {
  readonly put: (key: string, body: string) => Effect.Effect<void, Failure.Unavailable>
  /** Up to `length` bytes from `offset`, or undefined when the object does not exist. */
  readonly read: (key: string, offset: number, length: number) => Effect.Effect<Range | undefined, Failure.Unavailable>
  readonly exists: (key: string) => Effect.Effect<boolean, Failure.Unavailable>
  /** Every key under `prefix`, sorted. */
  readonly keys: (prefix: string) => Effect.Effect<ReadonlyArray<string>, Failure.Unavailable>
  /** An object's body as a stream, or undefined when it does not exist. */
  readonly stream: (key: string) => Effect.Effect<ReadableStream<Uint8Array> | undefined, Failure.Unavailable>
  /** Stores a streamed NDJSON body (of a known length); the stored size. */
  readonly upload: (key: string, body: ReadableStream<Uint8Array>, length: number) => Effect.Effect<number, Failure.Unavailable>
}>()("@factline/core/BatchFiles") {
  static readonly layer = (bucket: Bucket) => Layer.succeed(BatchFiles, make(bucket))
}

const unavailable = Failure.unavailable("the payload store")

export const make = (bucket: Bucket): BatchFiles["Service"] => ({
  put: Effect.fn("BatchFiles.put")(function*(key, body) {
    yield* Effect.tryPromise({ try: () => bucket.put(key, body, { httpMetadata: { contentType: "application/x-ndjson" } }), catch: unavailable })
  }),
  read: Effect.fn("BatchFiles.read")(function*(key, offset, length) {
    return yield* Effect.tryPromise({
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
  }),
  exists: Effect.fn("BatchFiles.exists")(function*(key) {
    return yield* Effect.tryPromise({ try: async () => (await bucket.head(key)) !== null, catch: unavailable })
  }),
  keys: Effect.fn("BatchFiles.keys")(function*(prefix) {
    return yield* Effect.tryPromise({
      try: async () => {
        const keys: Array<string> = []
        let cursor: string | undefined
        do {
          const listed = await bucket.list({ prefix, cursor })
          keys.push(...listed.objects.map((o) => o.key))
          cursor = listed.truncated ? listed.cursor : undefined
        } while (cursor !== undefined)
        return keys.sort()
      },
      catch: unavailable
    })
  }),
  stream: Effect.fn("BatchFiles.stream")(function*(key) {
    return yield* Effect.tryPromise({ try: async () => (await bucket.get(key))?.body ?? undefined, catch: unavailable })
  }),
  upload: Effect.fn("BatchFiles.upload")(function*(key, body, length) {
    return yield* Effect.tryPromise({
      try: async () => (await bucket.put(key, body, { httpMetadata: { contentType: "application/x-ndjson" } }))?.size ?? length,
      catch: unavailable
    })
  })
})
