/// <reference path="./node-sqlite.d.ts" preserve="true" />
/**
 * In-memory stand-ins for the Cloudflare bindings factline reaches through its
 * services, for tests in plain Node (Node ≥ 22.13, for `node:sqlite`):
 *
 * - `memoryD1()` — a `D1Database` over an in-memory SQLite database: D1 is
 *   SQLite, so the framework's real statements run unchanged (`json_each`,
 *   upserts, `RETURNING`); `batch()` is one transaction, as in D1.
 * - `memoryLedgerNamespace()` — the part of a `DurableObjectNamespace` the
 *   ledger calls (`LedgerShardNamespace`): ledger shards, each the real
 *   `LedgerStorage` over its own in-memory SQLite database.
 * - `memoryQueue()` — a `Queue` that records what was sent, and refuses a call
 *   over Cloudflare's limits as the local queue does.
 * - `memoryBucket()` — the part of `R2Bucket` the payload store and the batch
 *   files use (`Bindings.Bucket`).
 *
 * Each implements the type it stands in for, so the compiler checks it
 * against the same interface the live binding satisfies.
 *
 * They are for tests of product logic and of the framework's own SQL; the
 * workerd tests and `npm run dev` use the real local bindings.
 */
import { DatabaseSync } from "node:sqlite"
import type { Fact } from "@factline/schemas"
import type { ColdStats, Tiered } from "../ledger/ColdProtocol.js"
import type { LedgerShardNamespace } from "../ledger/LedgerNamespace.js"
import { type AppendAnswer, type AppendGroup, type Handover, type HandoverAnswer, type LedgerShardRpc, type ReadOptions, type ReshardExtras, type ReshardImport, type ShardCursor, type StreamKey, type StreamRead, type StreamState, toAnswer } from "../ledger/LedgerProtocol.js"
import * as LedgerStorage from "../ledger/LedgerStorage.js"
import * as ShardReshard from "../ledger/ShardReshard.js"
import * as KeyStorage from "../personal/KeyStorage.js"
import type { Bucket, BucketObject } from "../platform/Bindings.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import { bindable, normalize, transaction } from "./MemoryD1.js"

export { MemoryD1Database, memoryD1 } from "./MemoryD1.js"

/** A cursor over rows already read, as `SqlStorage.exec` answers (rows typed as the caller asks, as the real one does). */
class MemoryCursor<T extends Record<string, SqlStorageValue>> implements SqlStorageCursor<T> {
  private position = 0
  constructor(private readonly rows: Array<T>, readonly columnNames: Array<string>, readonly rowsWritten: number) {}
  get rowsRead() {
    return this.rows.length
  }
  next(): IteratorResult<T, undefined> {
    const row = this.rows[this.position]
    if (row === undefined) return { done: true, value: undefined }
    this.position++
    return { done: false, value: row }
  }
  toArray() {
    return this.rows.slice(this.position)
  }
  one() {
    const [row] = this.rows
    if (row === undefined || this.rows.length !== 1) throw new Error(`expected exactly one row, got ${this.rows.length}`)
    return row
  }
  raw<U extends Array<SqlStorageValue>>(): IterableIterator<U> {
    return this.rows.map((r) => Object.values(r) as U)[Symbol.iterator]()
  }
  [Symbol.iterator](): IterableIterator<T> {
    return this.rows[Symbol.iterator]()
  }
}

/** The `DurableObjectStorage` surface LedgerStorage uses (`sql.exec`, `transactionSync`), over in-memory SQLite. */
export const memoryDurableStorage = (): LedgerStorage.Storage => {
  const db = new DatabaseSync(":memory:")
  const exec = <T extends Record<string, SqlStorageValue>>(query: string, ...bindings: Array<unknown>): SqlStorageCursor<T> => {
    const statement = db.prepare(query)
    const params = bindings.map(bindable)
    const columnNames = statement.columns().map((c) => c.name)
    if (columnNames.length > 0) return new MemoryCursor(statement.all(...params).map(normalize) as Array<T>, columnNames, 0)
    return new MemoryCursor<T>([], columnNames, Number(statement.run(...params).changes))
  }
  return { sql: { exec }, transactionSync: <T>(run: () => T) => transaction(db, run) }
}

/** One in-memory ledger shard: the real LedgerStorage, without the relay alarm (handed-over rows stay in its outbox). */
export class MemoryLedgerShard implements LedgerShardRpc {
  private durable = memoryDurableStorage()
  storage = LedgerStorage.make(this.durable)
  /** Which streams this shard still answers, as the Durable Object's (ShardReshard). */
  private resharding = ShardReshard.make(this.durable, this.storage)
  /** The key store's calls (an object named `KeyStorage.objectName(tenant)` answers them), over its own in-memory store. */
  keys = KeyStorage.make(memoryDurableStorage())
  currentKeys(requests: ReadonlyArray<KeyStorage.CurrentRequest>, options: { readonly refuseErased: boolean; readonly now: string }) {
    return this.keys.currentKeys(requests, options)
  }
  readKeys(refs: ReadonlyArray<KeyStorage.KeyRef>) {
    return this.keys.readKeys(refs)
  }
  eraseKeys(subject: string, now: string) {
    return this.keys.eraseKeys(subject, now)
  }
  keyState(subject: string) {
    return this.keys.keyState(subject)
  }
  async append(groups: ReadonlyArray<AppendGroup>): Promise<ReadonlyArray<AppendAnswer>> {
    const refused = this.resharding.refusals(groups)
    const answers = this.storage.appendAll(groups.filter((_, i) => refused[i] === undefined)).map(toAnswer)
    let next = 0
    return refused.map((r) => r ?? answers[next++]!)
  }
  async handover(entries: ReadonlyArray<Handover>): Promise<HandoverAnswer> {
    return this.resharding.handover(entries)
  }
  async readStreams(keys: ReadonlyArray<StreamRead>): Promise<ReadonlyArray<StreamState>> {
    return keys.map((key) => this.readOne(key))
  }
  async read(key: StreamKey, options?: ReadOptions): Promise<StreamState> {
    return this.readOne(key, options)
  }
  private readOne(key: StreamRead, options?: ReadOptions): StreamState {
    const refused = this.resharding.refusal(key.stream)
    if (refused?.status === "moved") return { tenant_id: key.tenant_id, stream: key.stream, version: 0, facts: [], moved: refused.shard_count }
    return this.storage.readStream(key, options)
  }
  async reshardHold(index: number, from: number, to: number) {
    this.resharding.hold(index, from, to)
  }
  async reshardExtras(): Promise<ReshardExtras> {
    return this.resharding.extras()
  }
  async reshardSwitch() {
    return this.resharding.switch()
  }
  async reshardDrop(streams: number) {
    // The test kit's shards keep every fact hot: no cold ids to forget.
    return this.resharding.drop(streams, async () => [])
  }
  async reshardRelease() {
    this.resharding.release()
  }
  async reshardImport(input: ReshardImport) {
    return this.resharding.import(input)
  }
  async readShard(after: ShardCursor | undefined, limit: number): Promise<ReadonlyArray<Fact>> {
    return this.storage.readShard(after, limit)
  }
  async readShardSince(after: ShardCursor | undefined, since: string, scan: number) {
    return this.storage.readShardSince(after, since, scan)
  }
  async findFact(factId: string): Promise<Fact | null> {
    return this.storage.findFact(factId)
  }
  /** No alarm here: answers how many outbox rows wait, as the Durable Object does before re-arming. */
  async relayNow(): Promise<number> {
    return this.storage.outboxSize()
  }
  /** As the Durable Object's `deleteAll`: a fresh, empty store (no alarm here to delete). */
  async deleteAll(): Promise<void> {
    this.durable = memoryDurableStorage()
    this.storage = LedgerStorage.make(this.durable)
    this.resharding = ShardReshard.make(this.durable, this.storage)
    this.keys = KeyStorage.make(memoryDurableStorage())
  }
  /** What the Durable Object's alarm does for timers at `now` (ms): fires every due timer; returns the facts appended. */
  async fireTimers(now: number): Promise<ReadonlyArray<Fact>> {
    const fired: Array<Fact> = []
    if (this.resharding.firingPaused()) return fired
    for (;;) {
      const { facts, more } = await this.storage.fireDue(now, RetryPolicy.factQueues)
      fired.push(...facts)
      if (!more) return fired
    }
  }
  /** The test kit's shards keep every fact hot: tiering to R2 is the Durable Object's (ColdHistory has its own tests). */
  async tier(): Promise<Tiered> {
    return { tiered: 0, wrapped: true }
  }
  async coldStats(): Promise<ColdStats> {
    return this.storage.cold.stats()
  }
}

/** A `DurableObjectNamespace` of in-memory ledger shards, by name (the part the ledger calls). `shards` holds every shard created so far. */
export class MemoryLedgerNamespace implements LedgerShardNamespace {
  private readonly created = new Map<string, MemoryLedgerShard>()
  get shards(): ReadonlyMap<string, MemoryLedgerShard> {
    return this.created
  }
  idFromName(name: string): DurableObjectId {
    return { name, toString: () => name, equals: (other) => other.name === name }
  }
  get(id: DurableObjectId): MemoryLedgerShard {
    const name = id.toString()
    let shard = this.created.get(name)
    if (shard === undefined) {
      shard = new MemoryLedgerShard()
      this.created.set(name, shard)
    }
    return shard
  }
}

export const memoryLedgerNamespace = (): MemoryLedgerNamespace => new MemoryLedgerNamespace()

/** Cloudflare Queues' limits as the local queue (Miniflare) enforces them: messages a call, bytes a message, bytes a call. */
export const queueLimits = { messagesPerCall: 100, messageBytes: 128 * 1000, callBytes: 288 * 1000 }

/**
 * A queue that records every message sent to it (bodies in order, and every request with its delay in `requests`).
 * A call over Cloudflare's limits is refused whole, as the real queue refuses it, and records nothing.
 */
export class MemoryQueue<Body = unknown> implements Queue<Body> {
  readonly sent: Array<Body> = []
  readonly requests: Array<{ readonly body: Body; readonly delaySeconds: number }> = []
  async send(body: Body, options?: QueueSendOptions) {
    return this.sendBatch([{ body, ...(options?.delaySeconds === undefined ? {} : { delaySeconds: options.delaySeconds }) }])
  }
  async sendBatch(messages: Iterable<MessageSendRequest<Body>>, options?: QueueSendBatchOptions) {
    const list = [...messages]
    const sizes = list.map((m) => encoder.encode(JSON.stringify(m.body)).byteLength)
    if (list.length > queueLimits.messagesPerCall) throw new Error(`batch message count of ${list.length} exceeds limit of ${queueLimits.messagesPerCall}`)
    const largest = Math.max(0, ...sizes)
    if (largest > queueLimits.messageBytes) throw new Error(`message in batch has length ${largest} bytes which exceeds single message size limit of ${queueLimits.messageBytes}`)
    const total = sizes.reduce((a, b) => a + b, 0)
    if (total > queueLimits.callBytes) throw new Error(`batch size of ${total} bytes exceeds limit of ${queueLimits.callBytes}`)
    for (const m of list) {
      this.sent.push(m.body)
      this.requests.push({ body: m.body, delaySeconds: m.delaySeconds ?? options?.delaySeconds ?? 0 })
    }
    return { metadata: { metrics: await this.metrics() } }
  }
  async metrics() {
    return { backlogCount: this.sent.length, backlogBytes: 0 }
  }
}

export const memoryQueue = <Body = unknown>(): MemoryQueue<Body> => new MemoryQueue<Body>()

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** An object's stored bytes as a `BucketObject`: the whole of it, or a byte range. */
const bucketObject = (whole: Uint8Array, range?: { readonly offset: number; readonly length: number }): BucketObject => {
  const bytes = range === undefined ? whole : whole.slice(range.offset, range.offset + range.length)
  return {
    get body() {
      return new Blob([bytes]).stream()
    },
    text: async () => decoder.decode(bytes),
    arrayBuffer: async () => bytes.slice().buffer
  }
}

/** The part of an `R2Bucket` the payload store, the batch files and the facts archive use (`Bindings.Bucket`), in memory. */
export class MemoryBucket implements Bucket {
  /** Every object's bytes by key. */
  readonly objects = new Map<string, Uint8Array>()
  async put(key: string, value: string | Uint8Array | ReadableStream<Uint8Array>) {
    const bytes = typeof value === "string" ? encoder.encode(value) : value instanceof Uint8Array ? value.slice() : new Uint8Array(await new Response(value).arrayBuffer())
    this.objects.set(key, bytes)
    return { key, size: bytes.byteLength }
  }
  async get(key: string, options?: { readonly range?: { readonly offset: number; readonly length: number } }) {
    const bytes = this.objects.get(key)
    return bytes === undefined ? null : bucketObject(bytes, options?.range)
  }
  async head(key: string) {
    const bytes = this.objects.get(key)
    return bytes === undefined ? null : { key, size: bytes.byteLength }
  }
  /** R2's page: at most this many keys a `list` call (R2 lists 1,000). */
  pageSize = 1_000
  /** The keys under the prefix, a page at a time in key order (the cursor: the last key listed), as R2 pages them. */
  async list(options: { readonly prefix: string; readonly cursor?: string }) {
    const after = options.cursor
    const keys = [...this.objects.keys()].filter((key) => key.startsWith(options.prefix) && (after === undefined || key > after)).sort()
    const page = keys.slice(0, this.pageSize)
    const truncated = keys.length > page.length
    return { objects: page.map((key) => ({ key })), truncated, ...(truncated ? { cursor: page[page.length - 1] } : {}) }
  }
  async delete(keys: string | Array<string>) {
    for (const key of Array.isArray(keys) ? keys : [keys]) this.objects.delete(key)
  }
}

export const memoryBucket = (): MemoryBucket => new MemoryBucket()
