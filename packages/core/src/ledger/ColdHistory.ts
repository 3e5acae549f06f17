/**
 * A ledger shard with cold history: the shard's facts older than its tenant's hot window live in R2 segments
 * (Parquet, the archive's writer: archive/Parquet.ts) under the tenant's prefix
 * (`<tenant>/ledger/<shard>/<digest>.parquet`), named by its shard's manifest (ColdSegments.ts). This is the
 * async side the shard's RPC methods call: every read answers exactly what it answered before the facts were
 * tiered — stream reads and their pages, deciders' reads (snapshots and earlier decisions), shard walks,
 * recovery's windows, a fact by id — reading only the segments the manifest names, with a few decoded segments
 * kept per object. Appends judge re-appended cold ids against their stored rows (read from R2 first), so a
 * redelivered decision of a cold fact is a duplicate as before.
 *
 * `tier` moves one chunk: the oldest heads of streams past the cutoff (ColdSegments.candidates) are written as
 * one segment, read back and compared row by row, and only then recorded and deleted from SQLite in one
 * transaction (ColdSegments.record). A fault anywhere leaves every fact hot (R2 refusing, a shard evicted before
 * the transaction: at worst an unrecorded object, named by its content's digest, that nothing reads and the
 * tenant's deletion removes) or the chunk wholly cold. One tier runs at a time per object.
 *
 * A shard with no cold history answers from SQLite alone, without an await. Facts stay sealed as stored: a
 * segment holds the same ciphertext as the row did, and an erasure's destroyed keys make it unreadable alike.
 */
import * as Effect from "effect/Effect"
import type { Fact } from "@factline/schemas"
import * as Parquet from "../archive/Parquet.js"
import * as ObjectLayout from "../platform/ObjectLayout.js"
import type { Storage } from "../platform/Storage.js"
import type { ColdStats, Tiered } from "./ColdProtocol.js"
import type { AppendGroup, AppendResult, ReadOptions, ShardCursor, StreamKey, StreamRead, StreamState } from "./LedgerProtocol.js"
import type { FactRow } from "./LedgerRows.js"
import { toFact } from "./LedgerRows.js"
import type { ColdRange } from "./ColdSegments.js"
import { ColdFactsUnread, type LedgerStorage, maxReadLimit, type ShardWindow } from "./LedgerStorage.js"

/** Facts per segment at most (one tier call writes one). */
export const factsPerSegment = 5_000
/** Decoded segments kept per shard object. */
export const cachedSegments = 8
/** How many times an append reads cold rows again when more turned cold meanwhile. */
const appendAttempts = 3
const contentType = "application/vnd.apache.parquet"

export interface ColdHistory {
  readonly append: (groups: ReadonlyArray<AppendGroup>) => Promise<Array<AppendResult>>
  readonly readStream: (key: StreamRead, options?: ReadOptions) => Promise<StreamState>
  readonly readShard: (after: ShardCursor | undefined, limit: number) => Promise<ReadonlyArray<Fact>>
  readonly readShardSince: (after: ShardCursor | undefined, since: string, scan: number) => Promise<ShardWindow>
  readonly findFact: (factId: string) => Promise<Fact | null>
  /** Of these fact ids, those in cold history. */
  readonly coldIds: (factIds: ReadonlyArray<string>) => ReadonlyArray<string>
  /** One chunk: at most `limit` facts created before `cutoff` (ISO-8601) to one segment; `now` is recorded as its time. */
  readonly tier: (shardKey: string, cutoff: string, limit: number, now: string) => Promise<Tiered>
  readonly stats: () => ColdStats
  /** Every cold fact id of these streams (read from their segments): what a reshard's drop forgets with them. */
  readonly coldIdsOf: (streams: ReadonlyArray<string>) => Promise<ReadonlyArray<string>>
}

/** Position order of SQLite's BINARY collation (UTF-8 bytes, i.e. code points), not JavaScript's UTF-16 units. */
export const compareText = (a: string, b: string): number => {
  if (a === b) return 0
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!
    const y = b.codePointAt(i)!
    if (x !== y) return x < y ? -1 : 1
    if (x > 0xffff) i++
  }
  return a.length - b.length
}
const comparePosition = (a: ShardCursor, b: ShardCursor) => compareText(a.stream, b.stream) || a.sequence - b.sequence

const toParquet = (row: FactRow): Parquet.FactRow => ({
  tenant_id: row.tenant_id,
  fact_id: row.fact_id,
  stream: row.stream,
  sequence: row.sequence,
  type: row.type,
  body: row.data,
  causation_id: row.causation_id,
  correlation_id: row.correlation_id,
  caused_by: row.caused_by,
  created_at: row.created_at,
  traceparent: row.traceparent ?? null,
  schema_version: row.schema_version ?? 1
})

const fromParquet = (row: Parquet.FactRow): FactRow => ({
  fact_id: row.fact_id,
  tenant_id: row.tenant_id,
  stream: row.stream,
  sequence: row.sequence,
  type: row.type,
  data: row.body,
  causation_id: row.causation_id,
  correlation_id: row.correlation_id,
  caused_by: row.caused_by,
  created_at: row.created_at,
  traceparent: row.traceparent,
  schema_version: row.schema_version ?? 1
})

const sameRow = (a: FactRow, b: FactRow) =>
  a.fact_id === b.fact_id && a.tenant_id === b.tenant_id && a.stream === b.stream && a.sequence === b.sequence && a.type === b.type &&
  a.data === b.data && a.causation_id === b.causation_id && a.correlation_id === b.correlation_id && a.caused_by === b.caused_by &&
  a.created_at === b.created_at && (a.traceparent ?? null) === (b.traceparent ?? null) && (a.schema_version ?? 1) === (b.schema_version ?? 1)

const decode = (bytes: Uint8Array): Promise<ReadonlyArray<Parquet.FactRow>> =>
  Parquet.rows({ byteLength: bytes.byteLength, slice: (start, end) => bytes.slice(start, end).buffer })

const digest = async (bytes: Uint8Array): Promise<string> => {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))
  let hex = ""
  for (let i = 0; i < 16; i++) hex += hash[i]!.toString(16).padStart(2, "0")
  return hex
}

/** Where a shard's segments live: under its tenant's prefix (removed with the tenant), per shard. */
export const segmentPrefix = (shardKey: string, tenantId: string): string => {
  const shard = `${tenantId}/#`
  if (!shardKey.startsWith(shard)) throw new Error(`shard ${shardKey} does not hold tenant ${tenantId}'s facts`)
  return `${ObjectLayout.tenantPrefix(tenantId)}ledger/${shardKey.slice(shard.length)}/`
}

/** A small per-object cache of decoded segments, the most recently used kept. */
class Segments {
  private readonly decoded = new Map<string, Promise<ReadonlyArray<FactRow>>>()
  constructor(private readonly storage: Storage) {}

  load(objectKey: string): Promise<ReadonlyArray<FactRow>> {
    const cached = this.decoded.get(objectKey)
    if (cached !== undefined) {
      this.decoded.delete(objectKey)
      this.decoded.set(objectKey, cached)
      return cached
    }
    const loading = Effect.runPromise(this.storage.bytes(objectKey)).then(async (bytes) => {
      if (bytes === undefined) throw new Error(`cold segment ${objectKey} is missing from the bucket`)
      return (await decode(bytes)).map(fromParquet)
    })
    loading.catch(() => this.decoded.delete(objectKey))
    this.keep(objectKey, loading)
    return loading
  }

  keep(objectKey: string, rows: Promise<ReadonlyArray<FactRow>>) {
    this.decoded.set(objectKey, rows)
    while (this.decoded.size > cachedSegments) this.decoded.delete(this.decoded.keys().next().value!)
  }
}

export const make = (ledger: LedgerStorage, storage: Storage): ColdHistory => {
  const segments = new Segments(storage)
  const cold = ledger.cold
  let tiering = false

  /** The facts of `ranges` (in order) after position `after`, at most `limit`. */
  const factsOf = async (ranges: ReadonlyArray<ColdRange>, after: ShardCursor | undefined, limit: number): Promise<Array<FactRow>> => {
    const found: Array<FactRow> = []
    for (const range of ranges) {
      if (found.length >= limit) break
      const from = after !== undefined && after.stream === range.stream ? after.sequence : 0
      for (const row of await segments.load(range.objectKey)) {
        if (row.stream === range.stream && row.sequence > from && row.sequence >= range.first && row.sequence <= range.last) found.push(row)
      }
    }
    found.sort(comparePosition)
    return found.slice(0, limit)
  }

  /** A stream's facts after `after`, at most `limit`: its cold part first, then its hot one. */
  const streamPage = async (key: StreamKey, after: number, limit: number): Promise<Array<Fact>> => {
    const coldFacts = after < cold.last(key) ? (await factsOf(cold.ranges(key, after), { stream: key.stream, sequence: after }, limit)).map(toFact) : []
    if (coldFacts.length >= limit) return coldFacts
    const hot = ledger.readStream({ tenant_id: key.tenant_id, stream: key.stream }, { after: Math.max(after, coldFacts.at(-1)?.sequence ?? 0, cold.last(key)), limit: limit - coldFacts.length })
    return [...coldFacts, ...hot.facts]
  }

  const coldRows = async (located: ReadonlyMap<string, string>): Promise<Map<string, FactRow>> => {
    const rows = new Map<string, FactRow>()
    for (const objectKey of new Set(located.values())) {
      for (const row of await segments.load(objectKey)) if (located.has(row.fact_id)) rows.set(row.fact_id, row)
    }
    return rows
  }

  const findFact = async (factId: string): Promise<Fact | null> => {
    const hot = ledger.findFact(factId)
    if (hot !== null || !cold.exists()) return hot
    const row = (await coldRows(cold.locate([factId]))).get(factId)
    return row === undefined ? null : toFact(row)
  }

  /** The earlier decisions (LedgerSnapshots.earlierDecisions) when some decided fact is cold: each decision's run, cold and hot alike. */
  const earlierDecisions = async (key: StreamRead, after: number): Promise<Array<Fact>> => {
    const facts: Array<Fact> = []
    for (const factId of key.decided ?? []) {
      const first = await findFact(factId)
      if (first === null || first.tenant_id !== key.tenant_id || first.stream !== key.stream || first.sequence > after) continue
      for (let from = first.sequence - 1; ;) {
        const page = await streamPage(key, from, 64)
        const run = page.findIndex((fact) => fact.causation_id !== first.causation_id || fact.caused_by !== first.caused_by)
        facts.push(...(run < 0 ? page : page.slice(0, run)))
        if (run >= 0 || page.length < 64) break
        from = page.at(-1)!.sequence
      }
    }
    return facts
  }

  const readStream = async (key: StreamRead, options: ReadOptions = {}): Promise<StreamState> => {
    const hot = ledger.readStream(key, options)
    if (!cold.exists()) return hot
    const limit = Math.min(Math.max(1, Math.floor(options.limit ?? maxReadLimit)), maxReadLimit)
    const from = hot.after ?? Math.max(0, Math.floor(options.after ?? 0))
    const facts = from < cold.last(key) ? await streamPage(key, from, limit) : hot.facts
    const decidedCold = key.decided !== undefined && hot.after !== undefined && cold.locate(key.decided).size > 0
    return { ...hot, facts, ...(decidedCold ? { earlier: await earlierDecisions(key, hot.after!) } : {}) }
  }

  const readShard = async (after: ShardCursor | undefined, limit: number): Promise<ReadonlyArray<Fact>> => {
    const hot = ledger.readShard(after, limit)
    if (!cold.exists()) return hot
    // Every hot fact up to the page's last (when full), every cold one up to the last range read (when `limit` were found).
    const hotEnd = hot.length === limit ? hot.at(-1)! : undefined
    const ranges = cold.rangesAfter(after, limit).filter((range) => hotEnd === undefined || comparePosition({ stream: range.stream, sequence: range.first }, hotEnd) <= 0)
    const coldFacts = await factsOf(ranges, after, Number.MAX_SAFE_INTEGER)
    const coldEnd = coldFacts.length >= limit ? coldFacts.at(-1)! : undefined
    const merged = [...hot, ...coldFacts.map(toFact)].sort(comparePosition)
    return merged.filter((fact) => (hotEnd === undefined || comparePosition(fact, hotEnd) <= 0) && (coldEnd === undefined || comparePosition(fact, coldEnd) <= 0)).slice(0, limit)
  }

  const readShardSince = async (after: ShardCursor | undefined, since: string, scan: number): Promise<ShardWindow> => {
    if (!cold.exists()) return ledger.readShardSince(after, since, scan)
    const window = await readShard(after, Math.max(1, scan))
    const last = window.length === Math.max(1, scan) ? window.at(-1) : undefined
    return { facts: window.filter((fact) => fact.created_at >= since), next: last === undefined ? undefined : { stream: last.stream, sequence: last.sequence } }
  }

  const append = async (groups: ReadonlyArray<AppendGroup>): Promise<Array<AppendResult>> => {
    if (!cold.exists()) return ledger.appendAll(groups)
    const ids = groups.flatMap((group) => group.facts.map((draft) => draft.fact_id))
    for (let attempt = 1; ; attempt++) {
      const rows = await coldRows(cold.locate(ids))
      try {
        return ledger.appendAll(groups, rows)
      } catch (error) {
        // More ids turned cold while these were read (a tier committed meanwhile): read again.
        if (!(error instanceof ColdFactsUnread) || attempt >= appendAttempts) throw error
      }
    }
  }

  const tierChunk = async (shardKey: string, cutoff: string, limit: number, now: string): Promise<Tiered> => {
    const chunk = cold.candidates(cutoff, Math.max(1, Math.min(limit, factsPerSegment)))
    if (chunk.rows.length === 0) {
      if (ledger.exists()) cold.setCursor(chunk.cursor)
      return { tiered: 0, wrapped: chunk.wrapped }
    }
    const tenantId = chunk.rows[0]!.tenant_id
    if (chunk.rows.some((row) => row.tenant_id !== tenantId)) throw new Error(`shard ${shardKey} holds more than one tenant's facts; not tiered`)
    const bytes = Parquet.encode(chunk.rows.map(toParquet))
    const objectKey = `${segmentPrefix(shardKey, tenantId)}${await digest(bytes)}.parquet`
    await Effect.runPromise(storage.put(objectKey, bytes, contentType))
    const stored = await Effect.runPromise(storage.bytes(objectKey))
    if (stored === undefined) throw new Error(`cold segment ${objectKey} was not stored; its facts stay hot`)
    const written = (await decode(stored)).map(fromParquet)
    const expected = new Map(chunk.rows.map((row) => [row.fact_id, row]))
    if (written.length !== expected.size || written.some((row) => !sameRow(row, expected.get(row.fact_id) ?? ({} as FactRow)))) {
      throw new Error(`cold segment ${objectKey} does not read back as the ${expected.size} facts written; they stay hot`)
    }
    const recorded = cold.record({ objectKey, bytes: bytes.byteLength, rows: chunk.rows, cursor: chunk.cursor, tieredAt: now })
    if (recorded) segments.keep(objectKey, Promise.resolve(written))
    return recorded ? { tiered: chunk.rows.length, wrapped: chunk.wrapped, segment: objectKey } : { tiered: 0, wrapped: false }
  }

  return {
    append,
    readStream,
    readShard,
    readShardSince,
    findFact,
    coldIds: (ids) => [...cold.locate(ids).keys()],
    tier: async (shardKey, cutoff, limit, now) => {
      if (tiering) return { tiered: 0, wrapped: false, busy: true }
      tiering = true
      try {
        return await tierChunk(shardKey, cutoff, limit, now)
      } finally {
        tiering = false
      }
    },
    stats: () => cold.stats(),
    coldIdsOf: async (streams) => (await factsOf(cold.rangesOf(streams), undefined, Number.MAX_SAFE_INTEGER)).map((row) => row.fact_id)
  }
}
