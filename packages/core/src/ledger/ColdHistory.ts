/**
 * A ledger shard with cold history: the shard's facts older than its tenant's hot window live in R2 segments
 * (Parquet, the archive's writer: archive/Parquet.ts) under the tenant's prefix
 * (`<tenant>/ledger/<shard>/<digest>.parquet`), named by its shard's manifest (ColdSegments.ts). This is the
 * async side the shard's RPC methods call: every read answers exactly what it answered before the facts were
 * tiered — stream reads and their pages, deciders' reads (snapshots and earlier decisions), shard walks,
 * recovery's windows, a fact by id — reading only the segments the manifest names, with a few decoded segments
 * kept per object. Appends judge re-appended cold ids against their stored rows (read from R2 first), found in
 * their own stream's cold ranges, so a redelivered decision of a cold fact is a duplicate as before; a fact by id
 * alone that is not hot scans the shard's cold ranges (ColdIds.find).
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
import type { Storage } from "../platform/Storage.js"
import * as ColdIds from "./ColdIds.js"
import * as ColdObjects from "./ColdObjects.js"
import type { ColdStats, Tiered } from "./ColdProtocol.js"
import type { AppendGroup, AppendResult, ReadOptions, ShardCursor, StreamKey, StreamRead, StreamState } from "./LedgerProtocol.js"
import type { FactRow } from "./LedgerRows.js"
import { toFact } from "./LedgerRows.js"
import type { ColdRange } from "./ColdSegments.js"
import { ColdFactsUnread, type ColdManifest, type LedgerStorage, maxReadLimit, type ShardWindow } from "./LedgerStorage.js"
import { compareText } from "../platform/TextOrder.js"

/** Facts per segment at most (one tier call writes one). */
export const factsPerSegment = 5_000
/** How many times an append reads cold rows again when more turned cold meanwhile. */
const appendAttempts = 3

export interface ColdHistory {
  readonly append: (groups: ReadonlyArray<AppendGroup>) => Promise<Array<AppendResult>>
  readonly readStream: (key: StreamRead, options?: ReadOptions) => Promise<StreamState>
  readonly readShard: (after: ShardCursor | undefined, limit: number) => Promise<ReadonlyArray<Fact>>
  readonly readShardSince: (after: ShardCursor | undefined, since: string, scan: number) => Promise<ShardWindow>
  readonly findFact: (factId: string) => Promise<Fact | null>
  /** Of these fact ids, those in cold history (ids not hot scan the shard's cold ranges: ColdIds.find). */
  readonly coldIds: (factIds: ReadonlyArray<string>) => ReadonlyArray<string>
  /** One chunk: at most `limit` facts created before `cutoff` (ISO-8601) to one segment; `now` is recorded as its time. */
  readonly tier: (shardKey: string, cutoff: string, limit: number, now: string) => Promise<Tiered>
  readonly stats: () => ColdStats
  /** Every cold fact id of these streams (read from their segments): what a reshard's drop forgets with them. */
  readonly coldIdsOf: (streams: ReadonlyArray<string>) => Promise<ReadonlyArray<string>>
}

const comparePosition = (a: ShardCursor, b: ShardCursor) => compareText(a.stream, b.stream) || a.sequence - b.sequence

/** What the readers and the tiering work over: the shard's ledger and manifest, its bucket, its decoded segments. */
interface Cold {
  readonly ledger: LedgerStorage
  readonly cold: ColdManifest
  readonly storage: Storage
  readonly segments: ColdObjects.Segments
}

/** The facts of `ranges` (in order) after position `after`, at most `limit`. */
const factsOf = async (c: Cold, ranges: ReadonlyArray<ColdRange>, after: ShardCursor | undefined, limit: number): Promise<Array<FactRow>> => {
  const found: Array<FactRow> = []
  for (const range of ranges) {
    if (found.length >= limit) break
    const from = after !== undefined && after.stream === range.stream ? after.sequence : 0
    for (const row of await c.segments.load(range.objectKey)) {
      if (row.stream === range.stream && row.sequence > from && row.sequence >= range.first && row.sequence <= range.last) found.push(row)
    }
  }
  found.sort(comparePosition)
  return found.slice(0, limit)
}

/** A stream's facts after `after`, at most `limit`: its cold part first, then its hot one. */
const streamPage = async (c: Cold, key: StreamKey, after: number, limit: number): Promise<Array<Fact>> => {
  const coldFacts = after < c.cold.last(key) ? (await factsOf(c, c.cold.ranges(key, after), { stream: key.stream, sequence: after }, limit)).map(toFact) : []
  if (coldFacts.length >= limit) return coldFacts
  const hot = c.ledger.readStream({ tenant_id: key.tenant_id, stream: key.stream }, { after: Math.max(after, coldFacts.at(-1)?.sequence ?? 0, c.cold.last(key)), limit: limit - coldFacts.length })
  return [...coldFacts, ...hot.facts]
}

const coldRows = async (c: Cold, located: ReadonlyMap<string, string>): Promise<Map<string, FactRow>> => {
  const rows = new Map<string, FactRow>()
  for (const objectKey of new Set(located.values())) {
    for (const row of await c.segments.load(objectKey)) if (located.has(row.fact_id)) rows.set(row.fact_id, row)
  }
  return rows
}

/**
 * A fact by id: hot, or cold — looked up in `stream`'s own cold ranges when the caller knows the stream, else
 * anywhere in the shard (ColdIds.find: a scan of its ranges).
 */
const findFact = async (c: Cold, factId: string, stream?: StreamKey): Promise<Fact | null> => {
  const hot = c.ledger.findFact(factId)
  if (hot !== null || !c.cold.exists()) return hot
  const located = stream === undefined ? c.cold.find([factId]) : c.cold.locateInStreams([{ tenant_id: stream.tenant_id, stream: stream.stream, fact_id: factId }])
  const row = (await coldRows(c, located)).get(factId)
  return row === undefined ? null : toFact(row)
}

/** The earlier decisions (LedgerSnapshots.earlierDecisions) when some decided fact is cold: each decision's run, cold and hot alike. */
const earlierDecisions = async (c: Cold, key: StreamRead, after: number): Promise<Array<Fact>> => {
  const facts: Array<Fact> = []
  for (const factId of key.decided ?? []) {
    const first = await findFact(c, factId, key)
    if (first === null || first.tenant_id !== key.tenant_id || first.stream !== key.stream || first.sequence > after) continue
    for (let from = first.sequence - 1; ;) {
      const page = await streamPage(c, key, from, 64)
      const run = page.findIndex((fact) => fact.causation_id !== first.causation_id || fact.caused_by !== first.caused_by)
      facts.push(...(run < 0 ? page : page.slice(0, run)))
      if (run >= 0 || page.length < 64) break
      from = page.at(-1)!.sequence
    }
  }
  return facts
}

const readStream = async (c: Cold, key: StreamRead, options: ReadOptions = {}): Promise<StreamState> => {
  const hot = c.ledger.readStream(key, options)
  if (!c.cold.exists()) return hot
  const limit = Math.min(Math.max(1, Math.floor(options.limit ?? maxReadLimit)), maxReadLimit)
  const from = hot.after ?? Math.max(0, Math.floor(options.after ?? 0))
  const facts = from < c.cold.last(key) ? await streamPage(c, key, from, limit) : hot.facts
  const decidedCold = key.decided !== undefined && hot.after !== undefined &&
    c.cold.locateInStreams(key.decided.map((factId) => ({ tenant_id: key.tenant_id, stream: key.stream, fact_id: factId }))).size > 0
  return { ...hot, facts, ...(decidedCold ? { earlier: await earlierDecisions(c, key, hot.after!) } : {}) }
}

const readShard = async (c: Cold, after: ShardCursor | undefined, limit: number): Promise<ReadonlyArray<Fact>> => {
  const hot = c.ledger.readShard(after, limit)
  if (!c.cold.exists()) return hot
  // Every hot fact up to the page's last (when full), every cold one up to the last range read (when `limit` were found).
  const hotEnd = hot.length === limit ? hot.at(-1)! : undefined
  const ranges = c.cold.rangesAfter(after, limit).filter((range) => hotEnd === undefined || comparePosition({ stream: range.stream, sequence: range.first }, hotEnd) <= 0)
  const coldFacts = await factsOf(c, ranges, after, Number.MAX_SAFE_INTEGER)
  const coldEnd = coldFacts.length >= limit ? coldFacts.at(-1)! : undefined
  const merged = [...hot, ...coldFacts.map(toFact)].sort(comparePosition)
  return merged.filter((fact) => (hotEnd === undefined || comparePosition(fact, hotEnd) <= 0) && (coldEnd === undefined || comparePosition(fact, coldEnd) <= 0)).slice(0, limit)
}

const readShardSince = async (c: Cold, after: ShardCursor | undefined, since: string, scan: number): Promise<ShardWindow> => {
  if (!c.cold.exists()) return c.ledger.readShardSince(after, since, scan)
  const window = await readShard(c, after, Math.max(1, scan))
  const last = window.length === Math.max(1, scan) ? window.at(-1) : undefined
  return { facts: window.filter((fact) => fact.created_at >= since), next: last === undefined ? undefined : { stream: last.stream, sequence: last.sequence } }
}

const append = async (c: Cold, groups: ReadonlyArray<AppendGroup>): Promise<Array<AppendResult>> => {
  if (!c.cold.exists()) return c.ledger.appendAll(groups)
  const wanted = ColdIds.wantedOf(groups)
  for (let attempt = 1; ; attempt++) {
    const rows = await coldRows(c, c.cold.locateInStreams(wanted))
    try {
      return c.ledger.appendAll(groups, rows)
    } catch (error) {
      // More ids turned cold while these were read (a tier committed meanwhile): read again.
      if (!(error instanceof ColdFactsUnread) || attempt >= appendAttempts) throw error
    }
  }
}

const tierChunk = async (c: Cold, shardKey: string, cutoff: string, limit: number, now: string): Promise<Tiered> => {
  const chunk = c.cold.candidates(cutoff, Math.max(1, Math.min(limit, factsPerSegment)))
  if (chunk.rows.length === 0) {
    if (c.ledger.exists()) c.cold.setCursor(chunk.cursor)
    return { tiered: 0, wrapped: chunk.wrapped }
  }
  const tenantId = chunk.rows[0]!.tenant_id
  if (chunk.rows.some((row) => row.tenant_id !== tenantId)) throw new Error(`shard ${shardKey} holds more than one tenant's facts; not tiered`)
  const bytes = Parquet.encode(chunk.rows.map(ColdObjects.toParquet))
  const objectKey = `${ColdObjects.segmentPrefix(shardKey, tenantId)}${await ColdObjects.digest(bytes)}.parquet`
  await Effect.runPromise(c.storage.put(objectKey, bytes, ColdObjects.contentType))
  const stored = await Effect.runPromise(c.storage.bytes(objectKey))
  if (stored === undefined) throw new Error(`cold segment ${objectKey} was not stored; its facts stay hot`)
  const written = (await ColdObjects.decode(stored)).map(ColdObjects.fromParquet)
  const expected = new Map(chunk.rows.map((row) => [row.fact_id, row]))
  if (written.length !== expected.size || written.some((row) => !ColdObjects.sameRow(row, expected.get(row.fact_id) ?? ({} as FactRow)))) {
    throw new Error(`cold segment ${objectKey} does not read back as the ${expected.size} facts written; they stay hot`)
  }
  const recorded = c.cold.record({ objectKey, bytes: bytes.byteLength, rows: chunk.rows, cursor: chunk.cursor, tieredAt: now })
  if (recorded) c.segments.keep(objectKey, Promise.resolve(written))
  return recorded ? { tiered: chunk.rows.length, wrapped: chunk.wrapped, segment: objectKey } : { tiered: 0, wrapped: false }
}

export const make = (ledger: LedgerStorage, storage: Storage): ColdHistory => {
  const c: Cold = { ledger, cold: ledger.cold, storage, segments: new ColdObjects.Segments(storage) }
  const cold = c.cold
  let tiering = false
  return {
    append: (groups) => append(c, groups),
    readStream: (key, options) => readStream(c, key, options),
    readShard: (after, limit) => readShard(c, after, limit),
    readShardSince: (after, since, scan) => readShardSince(c, after, since, scan),
    findFact: (factId) => findFact(c, factId),
    coldIds: (ids) => [...cold.find(ids).keys()],
    tier: async (shardKey, cutoff, limit, now) => {
      if (tiering) return { tiered: 0, wrapped: false, busy: true }
      tiering = true
      try {
        return await tierChunk(c, shardKey, cutoff, limit, now)
      } finally {
        tiering = false
      }
    },
    stats: () => cold.stats(),
    coldIdsOf: async (streams) => (await factsOf(c, cold.rangesOf(streams), undefined, Number.MAX_SAFE_INTEGER)).map((row) => row.fact_id)
  }
}
