/**
 * The ledger inside one LedgerShard: facts in the Durable Object's SQLite
 * storage, and the outbox the shard relays from when a caller could not.
 *
 * Every append call is one `transactionSync`: its groups' facts (unique `fact_id`,
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
import { type Fact, TraceContext } from "@factline/schemas"
import * as FactId from "./FactId.js"
import { type AppendGroup, appendedFacts, type AppendResult, type Handover, type ReadOptions, type ShardCursor, type StreamKey, type StreamState } from "./LedgerProtocol.js"
import * as StableJson from "./StableJson.js"
import * as JsonArrays from "../platform/JsonArrays.js"

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
    schema_version INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, stream, sequence)
  ) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fact_id TEXT NOT NULL,
    destination TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (fact_id, destination)
  )`,
  `CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
  // One row per timer_scheduled fact (timer_id = its fact id); status pending → fired | cancelled | replaced.
  `CREATE TABLE IF NOT EXISTS timers (
    timer_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    stream TEXT NOT NULL,
    name TEXT NOT NULL,
    fire_at INTEGER NOT NULL,
    status TEXT NOT NULL,
    settled_by TEXT
  )`,
  `CREATE INDEX IF NOT EXISTS timers_due ON timers (fire_at) WHERE status = 'pending'`,
  `CREATE UNIQUE INDEX IF NOT EXISTS timers_pending_name ON timers (tenant_id, stream, name) WHERE status = 'pending'`
]

/** Timers fired per `fireDue` call; the alarm comes back at once while more are due. */
export const timersPerRun = 100

/** A timer as the shard keeps it. */
export interface TimerRow extends Record<string, SqlStorageValue> {
  timer_id: string
  tenant_id: string
  stream: string
  name: string
  /** Milliseconds since the epoch. */
  fire_at: number
  status: "pending" | "fired" | "cancelled" | "replaced"
  /** The fact that fired, cancelled or replaced it. */
  settled_by: string | null
}

/** What one `fireDue` call did: the facts appended (or found already appended) for due timers. */
export interface Fired {
  readonly facts: ReadonlyArray<Fact>
  /** Whether more timers were already due (the caller runs again at once). */
  readonly more: boolean
}

/** Columns of `facts` added since shards were first created: `ALTER TABLE` for a shard whose table lacks one. */
const addedFactColumns: ReadonlyArray<{ readonly name: string; readonly definition: string }> = [
  { name: "traceparent", definition: "traceparent TEXT" },
  { name: "schema_version", definition: "schema_version INTEGER NOT NULL DEFAULT 1" }
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
  /** Missing from the rows of a shard not written since fact versions (those facts are version 1). */
  schema_version: number | null
}

const toFact = (row: FactRow): Fact => ({
  fact_id: row.fact_id,
  tenant_id: row.tenant_id,
  stream: row.stream,
  sequence: row.sequence,
  type: row.type,
  data: JSON.parse(row.data),
  schema_version: typeof row.schema_version === "number" ? row.schema_version : 1,
  causation_id: row.causation_id,
  correlation_id: row.correlation_id,
  caused_by: row.caused_by,
  created_at: row.created_at,
  ...(typeof row.traceparent === "string" ? { traceparent: row.traceparent } : {})
})

/**
 * A Durable Object holds a string of at most 2 MB, a bound parameter included: a call's JSON parameters are split
 * at this many characters (a character of JSON takes at most 3 bytes of UTF-8; `JsonArrays`).
 */
export const maxJsonParameterChars = 512 * 1024
const jsonArrays = (texts: ReadonlyArray<string>) => JsonArrays.jsonArrays(texts, maxJsonParameterChars)

/** A stream's key in one call's maps: its tenant and name as a JSON pair (what the version read sends and answers). */
const keyOf = (key: StreamKey) => JSON.stringify([key.tenant_id, key.stream])

/** A fact as its row reads back (an appended fact stands in for its row until the call's insert). */
const toRow = (fact: Fact): FactRow => ({
  fact_id: fact.fact_id,
  tenant_id: fact.tenant_id,
  stream: fact.stream,
  sequence: fact.sequence,
  type: fact.type,
  data: StableJson.stringify(fact.data),
  causation_id: fact.causation_id,
  correlation_id: fact.correlation_id,
  caused_by: fact.caused_by,
  created_at: fact.created_at,
  traceparent: fact.traceparent ?? null,
  schema_version: fact.schema_version ?? 1
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
  /** The groups of one call in one transaction, a result per group in order (each as if appended alone, in turn). */
  readonly appendAll: (groups: ReadonlyArray<AppendGroup>) => Array<AppendResult>
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
  /** The earliest `fire_at` (ms) of a pending timer, if any. */
  readonly nextTimerAt: () => number | undefined
  /**
   * Fires the timers due at `now` (ms): appends their facts, once each, with outbox rows for `destinations` —
   * every fact queue: which of them listen to the fact's type is decided when it arrives, by the code then deployed.
   */
  readonly fireDue: (now: number, destinations: ReadonlyArray<string>) => Promise<Fired>
  /** Every timer of a stream (pending and settled), in scheduling order. */
  readonly timers: (key: StreamKey) => ReadonlyArray<TimerRow>
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

  /** Keeps the shard's timers in step with the timer facts just appended (same transaction). */
  const applyTimerFacts = (facts: ReadonlyArray<Fact>) => {
    for (const fact of facts) {
      if (fact.type !== "timer_scheduled" && fact.type !== "timer_cancelled") continue
      const data = fact.data as { readonly name: string; readonly fire_at?: string }
      sql.exec(
        "UPDATE timers SET status = ?, settled_by = ? WHERE tenant_id = ? AND stream = ? AND name = ? AND status = 'pending'",
        fact.type === "timer_scheduled" ? "replaced" : "cancelled", fact.fact_id, fact.tenant_id, fact.stream, data.name
      )
      if (fact.type === "timer_cancelled") continue
      const fireAt = Date.parse(data.fire_at ?? "")
      sql.exec(
        `INSERT INTO timers (timer_id, tenant_id, stream, name, fire_at, status) VALUES (?, ?, ?, ?, ?, 'pending')
         ON CONFLICT (timer_id) DO NOTHING`,
        fact.fact_id, fact.tenant_id, fact.stream, data.name, Number.isFinite(fireAt) ? fireAt : 0
      )
    }
  }

  /**
   * The groups of one call, in order, in one transaction and a fixed number of statements whatever their
   * count: one read of every fact id they carry, one of every stream's version (one index seek each), one
   * insert of every new fact (its rows as one JSON parameter: a Durable Object binds at most 100 parameters).
   * Each group is judged against what is stored and what the groups before it appended, as if appended alone.
   */
  const appendAll = (groups: ReadonlyArray<AppendGroup>): Array<AppendResult> => {
    if (groups.length === 0) return []
    ensureSchema()
    return storage.transactionSync(() => appendAllWithin(groups))
  }

  const append = (group: AppendGroup): AppendResult => appendAll([group])[0]!

  /** `appendAll` inside the caller's transaction. */
  const appendAllWithin = (groups: ReadonlyArray<AppendGroup>): Array<AppendResult> => {
    const ids = groups.flatMap((group) => group.facts.map((draft) => JSON.stringify(draft.fact_id)))
    const stored = new Map<string, FactRow>()
    for (const chunk of jsonArrays(ids)) {
      for (const row of sql.exec<FactRow>("SELECT * FROM facts WHERE fact_id IN (SELECT value FROM json_each(?))", chunk)) stored.set(row.fact_id, row)
    }
    const versions = new Map<string, number>()
    for (const chunk of jsonArrays([...new Set(groups.map(keyOf))])) {
      for (const row of sql.exec<{ tenant_id: string; stream: string; v: number }>(
        `SELECT k.value ->> 0 AS tenant_id, k.value ->> 1 AS stream,
           (SELECT COALESCE(MAX(sequence), 0) FROM facts WHERE tenant_id = k.value ->> 0 AND stream = k.value ->> 1) AS v
         FROM json_each(?) AS k`,
        chunk
      )) versions.set(keyOf(row), row.v)
    }
    const appended: Array<Fact> = []
    const results = groups.map((group) => {
      const key = keyOf(group)
      const result = judge(group, stored, versions.get(key) ?? 0)
      if (result.status === "appended") {
        versions.set(key, result.version)
        for (const fact of result.facts) {
          appended.push(fact)
          stored.set(fact.fact_id, toRow(fact))
        }
      }
      return result
    })
    if (appended.length > 0) {
      const rows = appended.map((fact) => {
        const row = stored.get(fact.fact_id)!
        return JSON.stringify([
          row.fact_id, row.tenant_id, row.stream, row.sequence, row.type, row.data,
          row.causation_id, row.correlation_id, row.caused_by, row.created_at, row.traceparent, row.schema_version
        ])
      })
      for (const chunk of jsonArrays(rows)) {
        sql.exec(
          `INSERT INTO facts (fact_id, tenant_id, stream, sequence, type, data, causation_id, correlation_id, caused_by, created_at, traceparent, schema_version)
           SELECT r.value ->> 0, r.value ->> 1, r.value ->> 2, r.value ->> 3, r.value ->> 4, r.value ->> 5, r.value ->> 6, r.value ->> 7, r.value ->> 8, r.value ->> 9, r.value ->> 10, r.value ->> 11
           FROM json_each(?) AS r`,
          chunk
        )
      }
      applyTimerFacts(appended)
    }
    return results
  }

  /** One group against the stored facts (and those appended before it in the same call) and its stream's version. */
  const judge = (group: AppendGroup, stored: ReadonlyMap<string, FactRow>, current: number): AppendResult => {
    const existing = group.facts.map((draft) => ({ draft, row: stored.get(draft.fact_id) }))
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
    const found = existing.filter((e) => e.row !== undefined)
    if (group.facts.length > 0 && found.length === group.facts.length) {
      return { status: "duplicate", version: current, facts: found.map((e) => toFact(e.row!)) }
    }
    if (found.length > 0) {
      return {
        status: "idempotency_conflict",
        fact_id: found[0]!.draft.fact_id,
        message: `only ${found.length} of ${group.facts.length} facts of this decision are stored; the same cause now decides a different set`
      }
    }
    if (group.expected_version !== undefined && group.expected_version !== current) {
      return { status: "version_conflict", version: current, expected_version: group.expected_version }
    }
    const version = current + group.facts.length
    return { status: "appended", version, facts: appendedFacts(group, version) }
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

  /** Whether the timers table can be read: the shard was written (an older shard gets the table on this call). */
  const timersReady = () => {
    if (!exists()) return false
    ensureSchema()
    return true
  }

  const nextTimerAt = () =>
    timersReady()
      ? sql.exec<{ at: number | null }>("SELECT MIN(fire_at) AS at FROM timers WHERE status = 'pending'").one().at ?? undefined
      : undefined

  const fireDue = async (now: number, destinations: ReadonlyArray<string>): Promise<Fired> => {
    if (!timersReady()) return { facts: [], more: false }
    const due = sql
      .exec<TimerRow & { data: string; correlation_id: string; traceparent: string | null }>(
        `SELECT t.*, f.data, f.correlation_id, f.traceparent FROM timers t JOIN facts f ON f.fact_id = t.timer_id
         WHERE t.status = 'pending' AND t.fire_at <= ? ORDER BY t.fire_at, t.timer_id LIMIT ?`,
        now, timersPerRun + 1
      )
      .toArray()
    const batch = due.slice(0, timersPerRun)
    // The fired fact's id comes from the timer's: however often this runs, the ledger holds the fact once.
    const ids = await Promise.all(batch.map((t) => FactId.make({ tenantId: t.tenant_id, cause: t.timer_id, decidedBy: "timer", position: 0 })))
    const createdAt = new Date(now).toISOString()
    const facts = storage.transactionSync(() =>
      batch.flatMap((timer, i) => {
        // Still pending? A cancel may have landed while the ids were computed.
        const claimed = sql.exec("UPDATE timers SET status = 'fired', settled_by = ? WHERE timer_id = ? AND status = 'pending' RETURNING timer_id", ids[i]!, timer.timer_id).toArray()
        if (claimed.length === 0) return []
        const scheduled = JSON.parse(timer.data) as { readonly fact: { readonly type: string; readonly data: Record<string, unknown>; readonly schema_version?: number } }
        const [result] = appendAllWithin([{
          tenant_id: timer.tenant_id,
          stream: timer.stream,
          facts: [{
            fact_id: ids[i]!,
            type: scheduled.fact.type,
            data: scheduled.fact.data,
            ...(scheduled.fact.schema_version === undefined ? {} : { schema_version: scheduled.fact.schema_version }),
            causation_id: timer.timer_id,
            correlation_id: timer.correlation_id,
            caused_by: `timer:${timer.name}`,
            created_at: createdAt,
            traceparent: TraceContext.child(timer.traceparent ?? undefined)
          }]
        }])
        if (result === undefined || result.status !== "appended" && result.status !== "duplicate") return []
        for (const fact of result.facts) {
          for (const destination of destinations) {
            sql.exec(
              "INSERT INTO outbox (fact_id, destination, created_at) VALUES (?, ?, ?) ON CONFLICT (fact_id, destination) DO NOTHING",
              fact.fact_id, destination, createdAt
            )
          }
        }
        return result.facts
      })
    )
    return { facts, more: due.length > batch.length }
  }

  const timers = (key: StreamKey): ReadonlyArray<TimerRow> =>
    timersReady()
      ? sql.exec<TimerRow>("SELECT * FROM timers WHERE tenant_id = ? AND stream = ? ORDER BY rowid", key.tenant_id, key.stream).toArray()
      : []

  return { append, appendAll, readStream, readShard, readShardSince, findFact, handover, outboxSize, pendingOutbox, deleteOutbox, getMeta, setMeta, exists, nextTimerAt, fireDue, timers }
}
