/**
 * The ledger inside one LedgerShard: facts in the Durable Object's SQLite
 * storage, and the outbox the shard relays from when a caller could not.
 *
 * Every append call is one `transactionSync` (LedgerAppend.ts): its groups' facts (unique `fact_id`,
 * gap-free per-stream sequence) are written together or not at all, in a fixed
 * number of statements whatever the count of groups and facts. Appends
 * write facts only — the consumer that appended relays them itself; the
 * outbox gets rows only through `handover`, when that relay failed. Tables
 * are created on the first write, so reading a shard (or a stream) that was
 * never written creates no storage. This module only writes and reads; the
 * relay is OutboxRelay's, the alarm the shard's.
 *
 * Timers (Timer.ts) live here too, in `timers`: appending a `timer_scheduled`
 * fact adds a pending timer in the same transaction (replacing a pending one
 * of the same stream and name), a `timer_cancelled` fact cancels one, and
 * `fireDue` appends each due timer's fact — its id derived from the timer's,
 * so firing twice appends it once — with its outbox rows, marking the timer
 * fired in that same transaction. The shard's alarm calls it; when to wake is
 * `nextTimerAt`.
 *
 * Columns added after a shard's tables were created (`traceparent`,
 * `schema_version`) are added on the shard's first write, once per object: a
 * shard from before them keeps working, and its older facts read without a
 * trace and as `schema_version` 1.
 */
import * as Schema from "effect/Schema"
import type { Fact } from "@factline/schemas"
import type { ColdStats } from "./ColdProtocol.js"
import type { AppendGroup, AppendResult, Handover, ReadOptions, ShardCursor, StreamKey, StreamRead, StreamState } from "./LedgerProtocol.js"
import { decodeCount, decodeFactRow, decoder, ensureSchema, exists, FactRow, type Shard, type Storage, toFact } from "./LedgerRows.js"
import * as ColdForget from "./ColdForget.js"
import * as ColdIds from "./ColdIds.js"
import * as ColdSegments from "./ColdSegments.js"
import { appendAll, appendAllWithin } from "./LedgerAppend.js"
import * as LedgerSnapshots from "./LedgerSnapshots.js"
import * as LedgerTimers from "./LedgerTimers.js"

export { maxJsonParameterChars, type Storage } from "./LedgerRows.js"
export { type Fired, type TimerRow, timersPerRun } from "./LedgerTimers.js"
export { ColdFactsUnread } from "./LedgerAppend.js"
import type { Fired, TimerRow } from "./LedgerTimers.js"

/** Facts returned by one stream read at most; a decider folds longer streams page by page. */
export const maxReadLimit = 10_000

/** A window of a shard's facts walked by `readShardSince`: those in time, and where the walk goes on (none: the end). */
export interface ShardWindow {
  readonly facts: ReadonlyArray<Fact>
  readonly next: ShardCursor | undefined
}

/** An outbox row with its fact: what the relay sends. */
export interface OutboxEntry {
  readonly id: number
  readonly destination: string
  readonly fact: Fact
}

/** The shard's cold manifest (ColdSegments), for ColdHistory: the async side that reads and writes the segments. */
export interface ColdManifest {
  readonly exists: () => boolean
  readonly last: (key: StreamKey) => number
  readonly ranges: (key: StreamKey, after: number) => Array<ColdSegments.ColdRange>
  readonly rangesAfter: (after: ShardCursor | undefined, facts: number) => Array<ColdSegments.ColdRange>
  /** The cold ids among these, each looked up in its own stream's ranges (ColdIds.locateInStreams), with their segments' keys. */
  readonly locateInStreams: (wanted: ReadonlyArray<ColdIds.Wanted>) => Map<string, string>
  /** The cold ids among these anywhere in the shard (ColdIds.find: a scan of its ranges, the slow path). */
  readonly find: (factIds: ReadonlyArray<string>) => Map<string, string>
  readonly candidates: (cutoff: string, limit: number) => ColdSegments.Candidates
  readonly setCursor: (cursor: readonly [string, string]) => void
  readonly record: (segment: ColdSegments.Segment) => boolean
  readonly stats: () => ColdStats
  /** The streams with cold history. */
  readonly streams: () => Array<string>
  /** The cold ranges of these streams (by name). */
  readonly rangesOf: (streams: ReadonlyArray<string>) => Array<ColdSegments.ColdRange>
  /** Forgets these streams' cold history, inside the caller's transaction (ColdForget.forget). */
  readonly forget: (streams: ReadonlyArray<string>, factIds: ReadonlyArray<string>) => void
}

export interface LedgerStorage {
  readonly append: (group: AppendGroup) => AppendResult
  /**
   * The groups of one call in one transaction, a result per group in order (each as if appended alone, in turn).
   * `cold`: the stored rows of re-appended fact ids that are cold (read from R2 by the caller); a cold id met
   * without its row throws `ColdFactsUnread` (nothing written).
   */
  readonly appendAll: (groups: ReadonlyArray<AppendGroup>, cold?: ReadonlyMap<string, FactRow>) => Array<AppendResult>
  /**
   * A stream's facts; with `snapshots` asked for (StreamRead), the deciders' snapshots and the facts after them.
   * Hot facts only, its version counting the cold ones: ColdHistory.readStream puts the cold facts before them.
   */
  readonly readStream: (key: StreamRead, options?: ReadOptions) => StreamState
  /** Every fact of the shard (all streams) after a `(stream, sequence)` cursor, for rebuilds. */
  readonly readShard: (after: { readonly stream: string; readonly sequence: number } | undefined, limit: number) => ReadonlyArray<Fact>
  /**
   * The facts appended at or after `since` (ISO-8601 `created_at`) among the next `scan` facts after a
   * `(stream, sequence)` cursor, and the cursor to continue from (undefined: the shard is walked). Bounded
   * work per call whatever the shard holds: recovery (Recovery.ts) walks a shard this way.
   */
  readonly readShardSince: (after: ShardCursor | undefined, since: string, scan: number) => ShardWindow
  /** The fact with this id, found by its unique index (one lookup, whatever the shard holds), or null. */
  readonly findFact: (factId: string) => Fact | null
  /** Outbox rows for stored facts (unknown ids are skipped); returns the rows written. */
  readonly handover: (entries: ReadonlyArray<Handover>) => number
  readonly outboxSize: () => number
  readonly pendingOutbox: (limit: number) => ReadonlyArray<OutboxEntry>
  readonly deleteOutbox: (ids: ReadonlyArray<number>) => void
  readonly getMeta: (key: string) => string | undefined
  readonly setMeta: (key: string, value: string | undefined) => void
  /** Whether anything was ever written here (reads of a never-written shard create nothing). */
  readonly exists: () => boolean
  /** The earliest `fire_at` (ms) of a pending timer, if any. */
  readonly nextTimerAt: () => number | undefined
  /**
   * Fires the timers due at `now` (ms): appends their facts, once each, with outbox rows for `destinations` —
   * every fact queue: which of them listen to the fact's type is decided when it arrives, by the code then deployed.
   */
  readonly fireDue: (now: number, destinations: ReadonlyArray<string>) => Promise<Fired>
  /** Every timer of a stream (pending and settled), in scheduling order. */
  readonly timers: (key: StreamKey) => ReadonlyArray<TimerRow>
  readonly cold: ColdManifest
}

// The rows this module reads besides `facts` rows and counts (LedgerRows), each decoded by its schema.
const decodeVersion = decoder(Schema.Struct({ v: Schema.Number }))
const decodeOutboxRow = decoder(Schema.Struct({ ...FactRow.fields, outbox_id: Schema.Number, destination: Schema.String }))
const decodePosition = decoder(Schema.Struct({ stream: Schema.String, sequence: Schema.Number }))
const decodeMeta = decoder(Schema.Struct({ value: Schema.String }))

/** A stream's version: its last hot sequence, or (none hot) its last cold one. */
const version = (s: Shard, key: StreamKey): number =>
  decodeVersion(s.sql.exec("SELECT COALESCE(MAX(sequence), 0) AS v FROM facts WHERE tenant_id = ? AND stream = ?", key.tenant_id, key.stream).one()).v ||
  ColdSegments.last(s, key)

const readStream = (s: Shard, key: StreamRead, options: ReadOptions = {}): StreamState => {
  const limit = Math.min(Math.max(1, Math.floor(options.limit ?? maxReadLimit)), maxReadLimit)
  const stream = { tenant_id: key.tenant_id, stream: key.stream }
  if (!exists(s)) return { ...stream, version: 0, facts: [] }
  const current = version(s, key)
  const withSnapshots = LedgerSnapshots.readWith(s, key, current, Math.max(0, Math.floor(options.after ?? 0)))
  const after = withSnapshots?.after ?? Math.max(0, Math.floor(options.after ?? 0))
  const rows = s.sql.exec("SELECT * FROM facts WHERE tenant_id = ? AND stream = ? AND sequence > ? ORDER BY sequence LIMIT ?", key.tenant_id, key.stream, after, limit)
  return { ...stream, version: current, facts: Array.from(rows, (row) => toFact(decodeFactRow(row))), ...withSnapshots }
}

const handover = (s: Shard, entries: ReadonlyArray<Handover>): number => {
  if (entries.length === 0) return 0
  ensureSchema(s)
  return s.storage.transactionSync(() => {
    let written = 0
    for (const entry of entries) {
      for (const destination of entry.destinations) {
        // Only for a stored fact (the SELECT finds nothing otherwise), once per destination.
        written += s.sql.exec(
          `INSERT INTO outbox (fact_id, destination, created_at) SELECT fact_id, ?, created_at FROM facts WHERE fact_id = ?
           ON CONFLICT (fact_id, destination) DO NOTHING RETURNING id`,
          destination, entry.fact_id
        ).toArray().length
      }
    }
    return written
  })
}

const outboxSize = (s: Shard) => (exists(s) ? decodeCount(s.sql.exec("SELECT COUNT(*) AS n FROM outbox").one()).n : 0)

const pendingOutbox = (s: Shard, limit: number): ReadonlyArray<OutboxEntry> =>
  !exists(s) ? [] : Array.from(
    s.sql.exec(`SELECT o.id AS outbox_id, o.destination, f.* FROM outbox o JOIN facts f ON f.fact_id = o.fact_id ORDER BY o.id LIMIT ?`, limit),
    (raw) => {
      const row = decodeOutboxRow(raw)
      return { id: row.outbox_id, destination: row.destination, fact: toFact(row) }
    }
  )

const deleteOutbox = (s: Shard, ids: ReadonlyArray<number>) => {
  if (ids.length === 0) return
  // One statement whatever the count: the ids travel as one JSON parameter.
  s.sql.exec("DELETE FROM outbox WHERE id IN (SELECT value FROM json_each(?))", JSON.stringify(ids))
}

const readShard = (s: Shard, after: { readonly stream: string; readonly sequence: number } | undefined, limit: number) =>
  !exists(s) ? [] : Array.from(
    s.sql.exec(`SELECT * FROM facts WHERE (stream, sequence) > (?, ?) ORDER BY stream, sequence LIMIT ?`, after?.stream ?? "", after?.sequence ?? 0, limit),
    (row) => toFact(decodeFactRow(row))
  )

const readShardSince = (s: Shard, after: ShardCursor | undefined, since: string, scan: number): ShardWindow => {
  if (!exists(s)) return { facts: [], next: undefined }
  const from = [after?.stream ?? "", after?.sequence ?? 0] as const
  // The last position of the window (the `scan`-th fact after the cursor); none: the window runs to the end.
  const position = s.sql
    .exec("SELECT stream, sequence FROM facts WHERE (stream, sequence) > (?, ?) ORDER BY stream, sequence LIMIT 1 OFFSET ?", ...from, Math.max(1, scan) - 1)
    .toArray()[0]
  const last = position === undefined ? undefined : decodePosition(position)
  const facts = Array.from(
    s.sql.exec(
      last === undefined
        ? "SELECT * FROM facts WHERE (stream, sequence) > (?, ?) AND created_at >= ? ORDER BY stream, sequence"
        : "SELECT * FROM facts WHERE (stream, sequence) > (?, ?) AND (stream, sequence) <= (?, ?) AND created_at >= ? ORDER BY stream, sequence",
      ...from, ...(last === undefined ? [] : [last.stream, last.sequence]), since
    ),
    (row) => toFact(decodeFactRow(row))
  )
  return { facts, next: last === undefined ? undefined : { stream: last.stream, sequence: last.sequence } }
}

// A shard whose tables predate `meta` (its first write adds it, ensureSchema) has no meta yet: nothing recorded.
const hasMeta = (s: Shard) =>
  s.upToDate || decodeCount(s.sql.exec("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'meta'").one()).n > 0
const getMeta = (s: Shard, key: string) =>
  exists(s) && hasMeta(s) ? s.sql.exec("SELECT value FROM meta WHERE key = ?", key).toArray().map((row) => decodeMeta(row).value)[0] : undefined
const setMeta = (s: Shard, key: string, value: string | undefined) => {
  ensureSchema(s)
  if (value === undefined) s.sql.exec("DELETE FROM meta WHERE key = ?", key)
  else s.sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", key, value)
}

const findFact = (s: Shard, factId: string): Fact | null => {
  if (!exists(s)) return null
  const row = s.sql.exec("SELECT * FROM facts WHERE fact_id = ?", factId).toArray()[0]
  return row === undefined ? null : toFact(decodeFactRow(row))
}

/** Whether the timers table can be read: the shard was written (an older shard gets the table on this call). */
const timersReady = (s: Shard) => {
  if (!exists(s)) return false
  ensureSchema(s)
  return true
}

/** The ledger of one shard over its Durable Object's storage. */
export const make = (storage: Storage): LedgerStorage => {
  const s: Shard = { storage, sql: storage.sql, created: false, upToDate: false }
  const appendWithin = (groups: ReadonlyArray<AppendGroup>) => appendAllWithin(s, groups)
  return {
    append: (group) => appendAll(s, [group])[0]!,
    appendAll: (groups, cold) => appendAll(s, groups, cold),
    readStream: (key, options) => readStream(s, key, options),
    readShard: (after, limit) => readShard(s, after, limit),
    readShardSince: (after, since, scan) => readShardSince(s, after, since, scan),
    findFact: (factId) => findFact(s, factId),
    handover: (entries) => handover(s, entries),
    outboxSize: () => outboxSize(s),
    pendingOutbox: (limit) => pendingOutbox(s, limit),
    deleteOutbox: (ids) => deleteOutbox(s, ids),
    getMeta: (key) => getMeta(s, key),
    setMeta: (key, value) => setMeta(s, key, value),
    exists: () => exists(s),
    nextTimerAt: () => (timersReady(s) ? LedgerTimers.nextTimerAt(s.sql) : undefined),
    fireDue: async (now, destinations) => (timersReady(s) ? LedgerTimers.fireDue(storage, appendWithin, now, destinations) : { facts: [], more: false }),
    timers: (key) => (timersReady(s) ? LedgerTimers.timers(s.sql, key) : []),
    cold: {
      exists: () => ColdSegments.hasCold(s),
      last: (key) => ColdSegments.last(s, key),
      ranges: (key, after) => ColdSegments.ranges(s, key, after),
      rangesAfter: (after, facts) => ColdSegments.rangesAfter(s, after, facts),
      locateInStreams: (wanted) => ColdIds.locateInStreams(s, wanted),
      find: (ids) => ColdIds.find(s, ids),
      candidates: (cutoff, limit) => {
        // A shard written before outbox or timers tables existed gets them here (its pins are read).
        if (exists(s)) ensureSchema(s)
        return ColdSegments.candidates(s, cutoff, limit)
      },
      setCursor: (cursor) => {
        ensureSchema(s)
        ColdSegments.setCursor(s, cursor)
      },
      record: (segment) => {
        ensureSchema(s)
        return ColdSegments.record(s, segment)
      },
      stats: () => ColdSegments.stats(s),
      streams: () => ColdForget.streams(s),
      rangesOf: (streams) => ColdForget.rangesOf(s, streams),
      forget: (streams, factIds) => ColdForget.forget(s, streams, factIds)
    }
  }
}
