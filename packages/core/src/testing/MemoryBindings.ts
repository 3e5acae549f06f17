/// <reference path="./node-sqlite.d.ts" preserve="true" />
/**
 * In-memory stand-ins for the Cloudflare bindings factline reaches through its
 * services, for tests in plain Node (Node ≥ 22.13, for `node:sqlite`):
 *
 * - `memoryD1()` — a `D1Database` over an in-memory SQLite database: D1 is
 *   SQLite, so the framework's real statements run unchanged (`json_each`,
 *   upserts, `RETURNING`); `batch()` is one transaction, as in D1.
 * - `memoryLedgerNamespace()` — a `DurableObjectNamespace` of ledger shards,
 *   each the real `LedgerStorage` over its own in-memory SQLite database.
 * - `memoryQueue()` — a `Queue` that records what was sent.
 * - `memoryBucket()` — the part of `R2Bucket` the payload store uses.
 *
 * They are for tests of product logic and of the framework's own SQL; the
 * workerd tests and `npm run dev` use the real local bindings.
 */
import { DatabaseSync } from "node:sqlite"
import type { Fact } from "@factline/schemas"
import type { AppendGroup, AppendResult, Handover, LedgerShardRpc, ReadOptions, ShardCursor, StreamKey, StreamState } from "../ledger/LedgerProtocol.js"
import * as LedgerStorage from "../ledger/LedgerStorage.js"

type Param = string | number | bigint | null | Uint8Array

const bindable = (value: unknown): Param => {
  if (value === undefined || value === null) return null
  if (typeof value === "boolean") return value ? 1 : 0
  if (typeof value === "number" || typeof value === "string" || typeof value === "bigint" || value instanceof Uint8Array) return value
  if (value instanceof ArrayBuffer) return new Uint8Array(value)
  throw new TypeError(`cannot bind a ${typeof value} to SQLite`)
}

const normalize = (row: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(row)) out[k] = typeof v === "bigint" ? Number(v) : v
  return out
}

const transaction = <T>(db: DatabaseSync, run: () => T): T => {
  if (db.isTransaction) return run()
  db.exec("BEGIN")
  try {
    const result = run()
    db.exec("COMMIT")
    return result
  } catch (error) {
    db.exec("ROLLBACK")
    throw error
  }
}

class MemoryD1Statement {
  constructor(readonly db: DatabaseSync, readonly query: string, readonly params: ReadonlyArray<Param> = []) {}
  bind(...values: ReadonlyArray<unknown>) {
    return new MemoryD1Statement(this.db, this.query, values.map(bindable))
  }
  /** Runs the statement: its rows (if any) and the number of rows it changed. */
  execute(): { results: Array<Record<string, unknown>>; changes: number } {
    const statement = this.db.prepare(this.query)
    if (statement.columns().length > 0) return { results: statement.all(...this.params).map(normalize), changes: 0 }
    const { changes } = statement.run(...this.params)
    return { results: [], changes: Number(changes) }
  }
  private result() {
    const { results, changes } = this.execute()
    return { results, success: true as const, meta: { changes, rows_read: results.length, rows_written: changes, duration: 0, last_row_id: 0, changed_db: changes > 0, size_after: 0 } }
  }
  async all<T = Record<string, unknown>>() {
    return this.result() as unknown as D1Result<T>
  }
  async run<T = Record<string, unknown>>() {
    return this.result() as unknown as D1Result<T>
  }
  async first<T = Record<string, unknown>>(column?: string): Promise<T | null> {
    const row = this.execute().results[0]
    if (row === undefined) return null
    return (column === undefined ? row : row[column]) as T
  }
  async raw<T = Array<unknown>>(): Promise<Array<T>> {
    return this.execute().results.map((r) => Object.values(r) as T)
  }
}

/** An in-memory D1 database. `sqlite` is the underlying database, for setup and inspection. */
export const memoryD1 = (): D1Database & { readonly sqlite: DatabaseSync } => {
  const sqlite = new DatabaseSync(":memory:")
  const db = {
    sqlite,
    prepare: (query: string) => new MemoryD1Statement(sqlite, query),
    batch: async (statements: ReadonlyArray<MemoryD1Statement>) =>
      transaction(sqlite, () => statements.map((s) => s.bind(...s.params)).map((s) => (s as any).result())),
    exec: async (query: string) => {
      sqlite.exec(query)
      return { count: 1, duration: 0 }
    },
    dump: async () => new ArrayBuffer(0),
    withSession: () => db
  }
  return db as unknown as D1Database & { readonly sqlite: DatabaseSync }
}

/** The `DurableObjectStorage` surface LedgerStorage uses (`sql.exec`, `transactionSync`), over in-memory SQLite. */
export const memoryDurableStorage = (): DurableObjectStorage => {
  const db = new DatabaseSync(":memory:")
  const exec = (query: string, ...bindings: ReadonlyArray<unknown>) => {
    const statement = db.prepare(query)
    const params = bindings.map(bindable)
    let rows: Array<Record<string, unknown>>
    let written = 0
    if (statement.columns().length > 0) rows = statement.all(...params).map(normalize)
    else {
      written = Number(statement.run(...params).changes)
      rows = []
    }
    return {
      toArray: () => rows,
      one: () => {
        if (rows.length !== 1) throw new Error(`expected exactly one row, got ${rows.length}`)
        return rows[0]
      },
      raw: () => rows.map((r) => Object.values(r))[Symbol.iterator](),
      [Symbol.iterator]: () => rows[Symbol.iterator](),
      rowsRead: rows.length,
      rowsWritten: written,
      columnNames: statement.columns().map((c) => c.name)
    }
  }
  return { sql: { exec }, transactionSync: <T>(run: () => T) => transaction(db, run) } as unknown as DurableObjectStorage
}

/** One in-memory ledger shard: the real LedgerStorage, without the relay alarm (handed-over rows stay in its outbox). */
export class MemoryLedgerShard implements LedgerShardRpc {
  readonly storage = LedgerStorage.make(memoryDurableStorage())
  async append(groups: ReadonlyArray<AppendGroup>): Promise<ReadonlyArray<AppendResult>> {
    return groups.map((group) => this.storage.append(group))
  }
  async handover(entries: ReadonlyArray<Handover>): Promise<number> {
    return this.storage.handover(entries)
  }
  async readStreams(keys: ReadonlyArray<StreamKey>): Promise<ReadonlyArray<StreamState>> {
    return keys.map((key) => this.storage.readStream(key))
  }
  async read(key: StreamKey, options?: ReadOptions): Promise<StreamState> {
    return this.storage.readStream(key, options)
  }
  async readShard(after: ShardCursor | undefined, limit: number): Promise<ReadonlyArray<Fact>> {
    return this.storage.readShard(after, limit)
  }
  /** No alarm here: answers how many outbox rows wait, as the Durable Object does before re-arming. */
  async relayNow(): Promise<number> {
    return this.storage.outboxSize()
  }
}

/** A `DurableObjectNamespace` of in-memory ledger shards, by name. `shards` holds every shard created so far. */
export const memoryLedgerNamespace = (): DurableObjectNamespace & { readonly shards: ReadonlyMap<string, MemoryLedgerShard> } => {
  const shards = new Map<string, MemoryLedgerShard>()
  const namespace = {
    shards,
    idFromName: (name: string) => ({ name, toString: () => name, equals: (other: { name?: string }) => other?.name === name }),
    get: (id: { name: string }) => {
      let shard = shards.get(id.name)
      if (shard === undefined) {
        shard = new MemoryLedgerShard()
        shards.set(id.name, shard)
      }
      return shard
    }
  }
  return namespace as unknown as DurableObjectNamespace & { readonly shards: ReadonlyMap<string, MemoryLedgerShard> }
}

/** A queue that records every message sent to it (bodies in order). */
export const memoryQueue = <Body = unknown>(): Queue<Body> & { readonly sent: Array<Body> } => {
  const sent: Array<Body> = []
  return {
    sent,
    send: async (body: Body) => void sent.push(body),
    sendBatch: async (messages: Iterable<MessageSendRequest<Body>>) => {
      for (const m of messages) sent.push(m.body)
    },
    metrics: async () => ({ backlogCount: sent.length, backlogBytes: 0 })
  } as unknown as Queue<Body> & { readonly sent: Array<Body> }
}

/** The part of an `R2Bucket` the payload store uses (`put`, `get` → `text()`), in memory. */
export const memoryBucket = (): R2Bucket & { readonly objects: Map<string, string> } => {
  const objects = new Map<string, string>()
  return {
    objects,
    put: async (key: string, value: string) => {
      objects.set(key, typeof value === "string" ? value : String(value))
      return { key }
    },
    get: async (key: string) => {
      const text = objects.get(key)
      return text === undefined ? null : { key, text: async () => text, json: async () => JSON.parse(text) }
    },
    head: async (key: string) => (objects.has(key) ? { key } : null),
    delete: async (keys: string | Array<string>) => {
      for (const key of Array.isArray(keys) ? keys : [keys]) objects.delete(key)
    }
  } as unknown as R2Bucket & { readonly objects: Map<string, string> }
}
