/**
 * The payload bucket's door over the test kit's in-memory bucket (which pages its listings as R2 does): reads,
 * writes, byte ranges, listings that page by themselves and stop when no more is pulled, deletes in calls of at
 * most 1,000 keys, and every refusal of the bucket one `Unavailable` naming the caller's service.
 */
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { describe, expect, it } from "vitest"
import * as Failure from "../failures/Failure.js"
import { memoryBucket } from "../testing/MemoryBindings.js"
import { type Bucket, PayloadBucket } from "./Storage.js"

/** The in-memory bucket, counting its list and delete calls. */
const counted = () => {
  const bucket = memoryBucket()
  const calls = { list: 0, delete: [] as Array<number> }
  const list = bucket.list.bind(bucket)
  const remove = bucket.delete.bind(bucket)
  bucket.list = (options) => (calls.list++, list(options))
  bucket.delete = (keys) => (calls.delete.push(Array.isArray(keys) ? keys.length : 1), remove(keys))
  return { bucket, calls, storage: PayloadBucket.make(bucket) }
}

const keyOf = (i: number) => `p/${String(i).padStart(5, "0")}`

describe("PayloadBucket (the R2 door)", () => {
  it("writes and reads text, bytes by range, a stream and the size; a missing object is undefined", async () => {
    const { bucket, storage } = counted()
    const size = await Effect.runPromise(storage.put("a.txt", "hello world", "text/plain"))
    expect(size).toBe(11)
    expect(await Effect.runPromise(storage.text("a.txt"))).toBe("hello world")
    expect(new TextDecoder().decode(await Effect.runPromise(storage.bytes("a.txt", { offset: 6, length: 5 })))).toBe("world")
    expect(await Effect.runPromise(storage.head("a.txt"))).toEqual({ size: 11 })
    const body = await Effect.runPromise(storage.stream("a.txt"))
    expect(await new Response(body).text()).toBe("hello world")
    const missing: Array<Effect.Effect<unknown, Failure.Unavailable>> = [storage.text("none"), storage.bytes("none"), storage.stream("none"), storage.head("none")]
    for (const read of missing) {
      expect(await Effect.runPromise(read)).toBeUndefined()
    }
    expect(bucket.objects.has("a.txt")).toBe(true)
  })

  it("lists every key under a prefix in key order, paging by itself; pulls no page past what is taken", async () => {
    const { bucket, calls, storage } = counted()
    for (let i = 0; i < 2_500; i++) bucket.objects.set(keyOf(i), new Uint8Array(1))
    bucket.objects.set("q/other", new Uint8Array(1))
    const all = await Effect.runPromise(Stream.runCollect(storage.list("p/")))
    expect(all).toEqual(Array.from({ length: 2_500 }, (_, i) => keyOf(i)))
    expect(calls.list).toBe(3)
    calls.list = 0
    const first = await Effect.runPromise(Stream.runCollect(Stream.take(storage.list("p/"), 1_200)))
    expect(first).toEqual(Array.from({ length: 1_200 }, (_, i) => keyOf(i)))
    expect(calls.list).toBe(2)
    expect(await Effect.runPromise(Stream.runCollect(storage.list("none/")))).toEqual([])
  })

  it("deletes in calls of at most 1,000 keys", async () => {
    const { bucket, calls, storage } = counted()
    for (let i = 0; i < 2_001; i++) bucket.objects.set(keyOf(i), new Uint8Array(1))
    await Effect.runPromise(storage.delete(Array.from({ length: 2_001 }, (_, i) => keyOf(i))))
    expect(calls.delete).toEqual([1_000, 1_000, 1])
    expect(bucket.objects.size).toBe(0)
    await Effect.runPromise(storage.delete([]))
    expect(calls.delete).toHaveLength(3)
  })

  it("a refusing bucket is one Unavailable, naming the payload store or the service the caller names", async () => {
    const refuse = () => Promise.reject(new Error("R2 is down"))
    const down: Bucket = { put: refuse, get: refuse, head: refuse, list: refuse, delete: refuse }
    const storage = PayloadBucket.make(down)
    const reads: Array<Effect.Effect<unknown, Failure.Unavailable>> = [storage.put("k", "v", "text/plain"), storage.text("k"), storage.bytes("k"), storage.stream("k"), storage.head("k"), storage.delete(["k"]), Stream.runCollect(storage.list("p/"))]
    for (const read of reads) {
      const failure = await Effect.runPromise(Effect.flip(read))
      expect(failure).toBeInstanceOf(Failure.Unavailable)
      expect(failure).toMatchObject({ service: "the payload store", message: "R2 is down", retryable: true })
    }
    const named = await Effect.runPromise(Effect.flip(storage.named("the facts archive").head("k")))
    expect(named).toMatchObject({ service: "the facts archive", message: "R2 is down" })
  })
})
