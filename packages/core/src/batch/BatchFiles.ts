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
import * as Stream from "effect/Stream"
import type { Storage } from "../platform/Storage.js"

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
  /** Over the payload bucket's door (`PayloadBucket`). */
  static readonly layer = (storage: Storage) => Layer.succeed(BatchFiles, make(storage))
}

const ndjson = "application/x-ndjson"

export const make = (storage: Storage): BatchFiles["Service"] => ({
  put: Effect.fn("BatchFiles.put")(function*(key, body) {
    yield* storage.put(key, body, ndjson)
  }),
  read: Effect.fn("BatchFiles.read")(function*(key, offset, length) {
    const head = yield* storage.head(key)
    if (head === undefined) return undefined
    if (offset >= head.size) return { bytes: new Uint8Array(0), size: head.size }
    const bytes = yield* storage.bytes(key, { offset, length: Math.min(length, head.size - offset) })
    return bytes === undefined ? undefined : { bytes, size: head.size }
  }),
  exists: Effect.fn("BatchFiles.exists")(function*(key) {
    return (yield* storage.head(key)) !== undefined
  }),
  keys: Effect.fn("BatchFiles.keys")(function*(prefix) {
    return (yield* Stream.runCollect(storage.list(prefix))).sort()
  }),
  stream: Effect.fn("BatchFiles.stream")(function*(key) {
    return yield* storage.stream(key)
  }),
  upload: Effect.fn("BatchFiles.upload")(function*(key, body, length) {
    return (yield* storage.put(key, body, ndjson)) ?? length
  })
})
