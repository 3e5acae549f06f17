/**
 * The ledger inside one LedgerShard: facts in the Durable Object's SQLite
 * storage, and the outbox the shard relays from when a caller could not.
 *
 * Every append group is one `transactionSync`: the facts (unique `fact_id`,
 * gap-free per-stream sequence) are written together or not at all. Appends
 * write facts only — the consumer that appended relays them itself; the
 * outbox gets rows only through `handover`, when that relay failed. Tables
 * are created on the first write, so reading a shard (or a stream) that was
 * never written creates no storage. This module only writes and reads; the
 * relay is OutboxRelay's, the alarm the shard's.
 *
 * Columns added after a shard's tables were created (`traceparent`) are added
 * on the shard's first write, once per object: a shard from before them keeps
 * working, and its older facts read without them.
 */
import type { Fact } from "@factline/schemas"
import type { AppendGroup, AppendResult, Handover, ReadOptions, ShardCursor, StreamKey, StreamState } from "./LedgerProtocol.js"
import * as StableJson from "./StableJson.js"

/** Facts returned by one stream read at most; a decider folds longer streams page by page. */
export const maxReadLimit = 10_000

const schema = [
  // Clustered by stream position: stream reads, versions and shard scans walk the primary key.
  `CREATE TABLE IF NOT EXISTS facts (
    tenant_id TEXT NOT NULL,
    stream TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    fact_id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    causation_id TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    caused_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    traceparent TEXT,
    PRIMARY KEY (tenant_id, stream, sequence)
  ) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fact_id TEXT NOT NULL,
    destination TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (fact_id, destination)
  )`,
  `CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`
]

/** Columns of `facts` added since shards were first created: `ALTER TABLE` for a shard whose table lacks one. */
const addedFactColumns: ReadonlyArray<{ readonly name: string; readonly definition: string }> = [
  { name: "traceparent", definition: "traceparent TEXT" }
]

interface FactRow extends Record<string, SqlStorageValue> {
  fact_id: string
  tenant_id: string
  stream: string
  sequence: number
  type: string
  data: string
  causation_id: string
  correlation_id: string
  caused_by: string
  created_at: string
  /** Null for facts stored before trace context (missing from the rows of a shard not written since). */
  traceparent: string | null
}

const toFact = (row: FactRow): Fact => ({
  fact_id: row.fact_id,
  tenant_id: row.tenant_id,
  stream: row.stream,
  sequence: row.sequence,
  type: row.type,
  data: JSON.parse(row.data),
  causation_id: row.causation_id,
  correlation_id: row.correlation_id,
  caused_by: row.caused_by,
  created_at: row.created_at,
  ...(typeof row.traceparent === "string" ? { traceparent: row.traceparent } : {})
})

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

export interface LedgerStorage {
  readonly append: (group: AppendGroup) => AppendResult
  readonly readStream: (key: StreamKey, options?: ReadOptions) => StreamState
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
}

/** What the ledger uses of a Durable Object's storage (a `DurableObjectStorage` is one): its SQL and synchronous transactions. */
export interface Storage {
  readonly sql: Pick<SqlStorage, "exec">
  readonly transactionSync: <T>(closure: () => T) => T
}

export const make = (storage: Storage): LedgerStorage => {
  const sql = storage.sql
  let created = false
  const exists = () =>
    created ||= sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'facts'").one().n > 0
  /** Tables created and every column present: checked once per object, on its first write. */
  let upToDate = false
  const ensureSchema = () => {
    if (upToDate) return
    for (const statement of schema) sql.exec(statement)
    // sqlite_master keeps the table's definition, ALTERs included: a column is added only when it is missing.
    const definition = sql.exec<{ sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'facts'").one().sql
    for (const column of addedFactColumns) {
      if (!new RegExp(`\\b${column.name}\\b`).test(definition)) sql.exec(`ALTER TABLE facts ADD COLUMN ${column.definition}`)
    }
    created = true
    upToDate = true
  }

  const version = (key: StreamKey): number =>
    sql.exec<{ v: number }>("SELECT COALESCE(MAX(sequence), 0) AS v FROM facts WHERE tenant_id = ? AND stream = ?", key.tenant_id, key.stream).one().v

  const find = (factId: string): FactRow | undefined => sql.exec<FactRow>("SELECT * FROM facts WHERE fact_id = ?", factId).toArray()[0]

  const append = (group: AppendGroup): AppendResult => {
    ensureSchema()
    return storage.transactionSync((): AppendResult => {
      const existing = group.facts.map((draft) => ({ draft, row: find(draft.fact_id) }))
      for (const { draft, row } of existing) {
        if (row === undefined) continue
        const same =
          row.type === draft.type &&
          row.tenant_id === group.tenant_id &&
          row.stream === group.stream &&
          row.data === StableJson.stringify(draft.data)
        if (!same) {
          return {
            status: "idempotency_conflict",
            fact_id: draft.fact_id,
            message: `fact ${draft.fact_id} (${row.type} in ${row.stream}) already exists with a different body; the same cause decided something else`
          }
        }
      }
      const stored = existing.filter((e) => e.row !== undefined)
      if (group.facts.length > 0 && stored.length === group.facts.length) {
        return { status: "duplicate", version: version(group), facts: stored.map((e) => toFact(e.row!)) }
      }
      if (stored.length > 0) {
        return {
          status: "idempotency_conflict",
          fact_id: stored[0]!.draft.fact_id,
          message: `only ${stored.length} of ${group.facts.length} facts of this decision are stored; the same cause now decides a different set`
        }
      }
      const current = version(group)
      if (group.expected_version !== undefined && group.expected_version !== current) {
        return { status: "version_conflict", version: current, expected_version: group.expected_version }
      }
      const facts: Array<Fact> = group.facts.map((draft, i) => ({
        ...draft,
        tenant_id: group.tenant_id,
        stream: group.stream,
        sequence: current + i + 1
      }))
      for (const fact of facts) {
        sql.exec(
          `INSERT INTO facts (fact_id, tenant_id, stream, sequence, type, data, causation_id, correlation_id, caused_by, created_at, traceparent)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          fact.fact_id, fact.tenant_id, fact.stream, fact.sequence, fact.type, StableJson.stringify(fact.data),
          fact.causation_id, fact.correlation_id, fact.caused_by, fact.created_at, fact.traceparent ?? null
        )
      }
      return { status: "appended", version: current + facts.length, facts }
    })
  }

  const readStream = (key: StreamKey, options: ReadOptions = {}): StreamState => {
    const after = Math.max(0, Math.floor(options.after ?? 0))
    const limit = Math.min(Math.max(1, Math.floor(options.limit ?? maxReadLimit)), maxReadLimit)
    if (!exists()) return { tenant_id: key.tenant_id, stream: key.stream, version: 0, facts: [] }
    const rows = sql
      .exec<FactRow>(
        "SELECT * FROM facts WHERE tenant_id = ? AND stream = ? AND sequence > ? ORDER BY sequence LIMIT ?",
        key.tenant_id, key.stream, after, limit
      )
      .toArray()
    return { tenant_id: key.tenant_id, stream: key.stream, version: version(key), facts: rows.map(toFact) }
  }

  const handover = (entries: ReadonlyArray<Handover>): number => {
    if (entries.length === 0) return 0
    ensureSchema()
    return storage.transactionSync(() => {
      let written = 0
      for (const entry of entries) {
        for (const destination of entry.destinations) {
          // Only for a stored fact (the SELECT finds nothing otherwise), once per destination.
          written += sql.exec(
            `INSERT INTO outbox (fact_id, destination, created_at) SELECT fact_id, ?, created_at FROM facts WHERE fact_id = ?
             ON CONFLICT (fact_id, destination) DO NOTHING RETURNING id`,
            destination, entry.fact_id
          ).toArray().length
        }
      }
      return written
    })
  }

  const outboxSize = () => (exists() ? sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM outbox").one().n : 0)

  const pendingOutbox = (limit: number): ReadonlyArray<OutboxEntry> =>
    !exists() ? [] : sql
      .exec<FactRow & { outbox_id: number; destination: string }>(
        `SELECT o.id AS outbox_id, o.destination, f.* FROM outbox o JOIN facts f ON f.fact_id = o.fact_id ORDER BY o.id LIMIT ?`,
        limit
      )
      .toArray()
      .map((row) => ({ id: row.outbox_id, destination: row.destination, fact: toFact(row) }))

  const deleteOutbox = (ids: ReadonlyArray<number>) => {
    if (ids.length === 0) return
    // One statement whatever the count: the ids travel as one JSON parameter.
    sql.exec("DELETE FROM outbox WHERE id IN (SELECT value FROM json_each(?))", JSON.stringify(ids))
  }

  const readShard = (after: { readonly stream: string; readonly sequence: number } | undefined, limit: number) =>
    !exists() ? [] : sql
      .exec<FactRow>(
        `SELECT * FROM facts WHERE (stream, sequence) > (?, ?) ORDER BY stream, sequence LIMIT ?`,
        after?.stream ?? "", after?.sequence ?? 0, limit
      )
      .toArray()
      .map(toFact)

  const readShardSince = (after: ShardCursor | undefined, since: string, scan: number): ShardWindow => {
    if (!exists()) return { facts: [], next: undefined }
    const from = [after?.stream ?? "", after?.sequence ?? 0] as const
    // The last position of the window (the `scan`-th fact after the cursor); none: the window runs to the end.
    const last = sql
      .exec<{ stream: string; sequence: number }>(
        "SELECT stream, sequence FROM facts WHERE (stream, sequence) > (?, ?) ORDER BY stream, sequence LIMIT 1 OFFSET ?",
        ...from, Math.max(1, scan) - 1
      )
      .toArray()[0]
    const facts = sql
      .exec<FactRow>(
        last === undefined
          ? "SELECT * FROM facts WHERE (stream, sequence) > (?, ?) AND created_at >= ? ORDER BY stream, sequence"
          : "SELECT * FROM facts WHERE (stream, sequence) > (?, ?) AND (stream, sequence) <= (?, ?) AND created_at >= ? ORDER BY stream, sequence",
        ...from, ...(last === undefined ? [] : [last.stream, last.sequence]), since
      )
      .toArray()
      .map(toFact)
    return { facts, next: last === undefined ? undefined : { stream: last.stream, sequence: last.sequence } }
  }

  const getMeta = (key: string) =>
    exists() ? sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", key).toArray()[0]?.value : undefined
  const setMeta = (key: string, value: string | undefined) => {
    ensureSchema()
    if (value === undefined) sql.exec("DELETE FROM meta WHERE key = ?", key)
    else sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", key, value)
  }

  const findFact = (factId: string): Fact | null => {
    if (!exists()) return null
    const row = find(factId)
    return row === undefined ? null : toFact(row)
  }

  return { append, readStream, readShard, readShardSince, findFact, handover, outboxSize, pendingOutbox, deleteOutbox, getMeta, setMeta, exists }
}
