/**
 * The payload bucket's one door (R2): every read, write, listing and delete of the bucket goes through
 * `PayloadBucket`, typed all the way — objects read as text, bytes (a byte range) or a stream, written from a
 * string, bytes or a stream, listed by prefix as a `Stream` of keys that pages by itself (R2 lists 1,000 keys a
 * page; the cursor loop is written here once), deleted in calls of at most 1,000 keys. Every refusal of the
 * bucket is one `Failure.Unavailable` (retryable: R2 being down), naming the service its caller reads it as
 * (`named`: "the payload store", "the facts archive"…), so the message a client or an operator sees is the one
 * it saw before the door.
 *
 * The raw binding (`Bucket`: an `R2Bucket` in a Worker, `testing/MemoryBindings`' in-memory bucket in Node)
 * lives here and in `Bindings` only; `npm run check:architecture` refuses a raw bucket call outside `platform/`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Failure from "../failures/Failure.js"

/**
 * The part of an R2 bucket the door uses: an `R2Bucket` is one, and so is the test kit's in-memory bucket.
 * Objects are put from a string, bytes (the facts archive's Parquet) or a stream, read whole or by byte range,
 * listed by prefix, and deleted.
 */
export interface Bucket {
  put(key: string, value: string | Uint8Array | ReadableStream<Uint8Array>, options?: { readonly httpMetadata?: { readonly contentType?: string } }): Promise<{ readonly size: number } | null>
  get(key: string, options?: { readonly range?: { readonly offset: number; readonly length: number } }): Promise<BucketObject | null>
  head(key: string): Promise<{ readonly size: number } | null>
  list(options: { readonly prefix: string; readonly cursor?: string }): Promise<{ readonly objects: ReadonlyArray<{ readonly key: string }>; readonly truncated: boolean; readonly cursor?: string }>
  delete(keys: string | Array<string>): Promise<void>
}

/** An object read from a `Bucket` (the requested range of it). */
export interface BucketObject {
  readonly body: ReadableStream<Uint8Array>
  text(): Promise<string>
  arrayBuffer(): Promise<ArrayBuffer>
}

/** A byte range of an object. */
export interface Range {
  readonly offset: number
  readonly length: number
}

/** The payload bucket, typed: each method fails only with `Unavailable` (the bucket refused). */
export interface Storage {
  /** Writes `value` at `key` (replacing what was there); the stored size, undefined when R2 stored nothing. */
  readonly put: (key: string, value: string | Uint8Array | ReadableStream<Uint8Array>, contentType: string) => Effect.Effect<number | undefined, Failure.Unavailable>
  /** The object's text, or undefined when there is none. */
  readonly text: (key: string) => Effect.Effect<string | undefined, Failure.Unavailable>
  /** The object's bytes (those of `range` when given), or undefined when there is none. */
  readonly bytes: (key: string, range?: Range) => Effect.Effect<Uint8Array<ArrayBuffer> | undefined, Failure.Unavailable>
  /** The object's body as a stream, or undefined when there is none. */
  readonly stream: (key: string) => Effect.Effect<ReadableStream<Uint8Array> | undefined, Failure.Unavailable>
  /** The object's size, or undefined when there is none. */
  readonly head: (key: string) => Effect.Effect<{ readonly size: number } | undefined, Failure.Unavailable>
  /** Deletes the objects at `keys` (at most 1,000 a call to R2; a missing key is no error). */
  readonly delete: (keys: ReadonlyArray<string>) => Effect.Effect<void, Failure.Unavailable>
  /** Every key under `prefix`, in the listing's (key) order; the next page is listed when the stream is pulled past this one. */
  readonly list: (prefix: string) => Stream.Stream<string, Failure.Unavailable>
  /** The same bucket, its failures naming `service`. */
  readonly named: (service: string) => Storage
}

/** R2 deletes up to 1,000 keys a call. */
const deleteLimit = 1_000

/** The door over a raw bucket, its failures naming `service` (default: the payload store). */
export const make = (bucket: Bucket, service: string = "the payload store"): Storage => {
  const call = <A>(run: () => Promise<A>) => Effect.tryPromise({ try: run, catch: Failure.unavailable(service) })
  const listPage = Effect.fn("PayloadBucket.list")(function*(prefix: string, cursor: string | undefined) {
    const page = yield* call(() => bucket.list(cursor === undefined ? { prefix } : { prefix, cursor }))
    const next = page.truncated && page.cursor !== undefined ? Option.some(page.cursor) : Option.none<string>()
    return [page.objects.map((object) => object.key), next] as const
  })
  return {
    put: Effect.fn("PayloadBucket.put")(function*(key, value, contentType) {
      const stored = yield* call(() => bucket.put(key, value, { httpMetadata: { contentType } }))
      return stored?.size
    }),
    text: Effect.fn("PayloadBucket.text")(function*(key) {
      return yield* call(async () => (await bucket.get(key))?.text())
    }),
    bytes: Effect.fn("PayloadBucket.bytes")(function*(key, range) {
      return yield* call(async () => {
        const object = await bucket.get(key, range === undefined ? undefined : { range })
        return object === null ? undefined : new Uint8Array(await object.arrayBuffer())
      })
    }),
    stream: Effect.fn("PayloadBucket.stream")(function*(key) {
      return yield* call(async () => (await bucket.get(key))?.body)
    }),
    head: Effect.fn("PayloadBucket.head")(function*(key) {
      const head = yield* call(() => bucket.head(key))
      return head === null ? undefined : { size: head.size }
    }),
    delete: Effect.fn("PayloadBucket.delete")(function*(keys) {
      for (let i = 0; i < keys.length; i += deleteLimit) {
        const chunk = keys.slice(i, i + deleteLimit)
        yield* call(() => bucket.delete(chunk))
      }
    }),
    list: (prefix) => Stream.paginate(undefined as string | undefined, (cursor) => listPage(prefix, cursor)),
    named: (other) => make(bucket, other)
  }
}

/** The R2 bucket of large payloads and batch files (its name in `payload_ref`s is a setting), behind its door. */
export class PayloadBucket extends Context.Service<PayloadBucket, Storage>()("@factline/core/PayloadBucket") {
  /** The door over a raw bucket (a Worker's binding, the test kit's in-memory one). */
  static readonly make = make
  static readonly layer = (bucket: Bucket) => Layer.succeed(PayloadBucket, make(bucket))
}
