/**
 * The ledger inside one LedgerShard: facts and their outbox rows in the
 * Durable Object's SQLite storage.
 *
 * Every append group is one `transactionSync`: the facts (unique `fact_id`,
 * gap-free per-stream sequence) and one outbox row per fact per downstream
 * queue are written together or not at all. Relaying the outbox to the queues
 * is a separate step (the shard's alarm); this module only writes and reads.
 */
import type { Fact } from "@factline/schemas"
import type { AppendGroup, AppendResult, ReadOptions, StreamKey, StreamState } from "./LedgerProtocol.js"
import * as StableJson from "./StableJson.js"

/** The downstream queues a fact is relayed to when its draft does not say. */
export const outboxDestinations: ReadonlyArray<string> = ["factline-projections", "factline-fact-processing"]

const schema = [
  `CREATE TABLE IF NOT EXISTS facts (
    fact_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    stream TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    causation_id TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    caused_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (tenant_id, stream, sequence)
  )`,
  `CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fact_id TEXT NOT NULL,
    destination TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (fact_id, destination)
  )`,
  `CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`
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
  created_at: row.created_at
})

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
  readonly outboxSize: () => number
  readonly pendingOutbox: (limit: number) => ReadonlyArray<OutboxEntry>
  readonly deleteOutbox: (ids: ReadonlyArray<number>) => void
  readonly getMeta: (key: string) => string | undefined
  readonly setMeta: (key: string, value: string | undefined) => void
}

export const make = (storage: DurableObjectStorage): LedgerStorage => {
  const sql = storage.sql
  for (const statement of schema) sql.exec(statement)

  const version = (key: StreamKey): number =>
    sql.exec<{ v: number }>("SELECT COALESCE(MAX(sequence), 0) AS v FROM facts WHERE tenant_id = ? AND stream = ?", key.tenant_id, key.stream).one().v

  const find = (factId: string): FactRow | undefined => sql.exec<FactRow>("SELECT * FROM facts WHERE fact_id = ?", factId).toArray()[0]

  const append = (group: AppendGroup): AppendResult =>
    storage.transactionSync((): AppendResult => {
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
      const facts: Array<Fact> = group.facts.map(({ destinations: _, ...draft }, i) => ({
        ...draft,
        tenant_id: group.tenant_id,
        stream: group.stream,
        sequence: current + i + 1
      }))
      facts.forEach((fact, i) => {
        sql.exec(
          `INSERT INTO facts (fact_id, tenant_id, stream, sequence, type, data, causation_id, correlation_id, caused_by, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          fact.fact_id, fact.tenant_id, fact.stream, fact.sequence, fact.type, StableJson.stringify(fact.data),
          fact.causation_id, fact.correlation_id, fact.caused_by, fact.created_at
        )
        for (const destination of group.facts[i]!.destinations ?? outboxDestinations) {
          sql.exec("INSERT INTO outbox (fact_id, destination, created_at) VALUES (?, ?, ?)", fact.fact_id, destination, fact.created_at)
        }
      })
      return { status: "appended", version: current + facts.length, facts }
    })

  const readStream = (key: StreamKey, options: ReadOptions = {}): StreamState => {
    const after = Math.max(0, Math.floor(options.after ?? 0))
    const limit = Math.min(Math.max(1, Math.floor(options.limit ?? 10_000)), 10_000)
    const rows = sql
      .exec<FactRow>(
        "SELECT * FROM facts WHERE tenant_id = ? AND stream = ? AND sequence > ? ORDER BY sequence LIMIT ?",
        key.tenant_id, key.stream, after, limit
      )
      .toArray()
    return { tenant_id: key.tenant_id, stream: key.stream, version: version(key), facts: rows.map(toFact) }
  }

  const outboxSize = () => sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM outbox").one().n

  const pendingOutbox = (limit: number): ReadonlyArray<OutboxEntry> =>
    sql
      .exec<FactRow & { outbox_id: number; destination: string }>(
        `SELECT o.id AS outbox_id, o.destination, f.* FROM outbox o JOIN facts f ON f.fact_id = o.fact_id ORDER BY o.id LIMIT ?`,
        limit
      )
      .toArray()
      .map((row) => ({ id: row.outbox_id, destination: row.destination, fact: toFact(row) }))

  const deleteOutbox = (ids: ReadonlyArray<number>) => {
    for (let i = 0; i < ids.length; i += 90) {
      const chunk = ids.slice(i, i + 90)
      sql.exec(`DELETE FROM outbox WHERE id IN (${chunk.map(() => "?").join(", ")})`, ...chunk)
    }
  }

  const readShard = (after: { readonly stream: string; readonly sequence: number } | undefined, limit: number) =>
    sql
      .exec<FactRow>(
        `SELECT * FROM facts WHERE (stream, sequence) > (?, ?) ORDER BY stream, sequence LIMIT ?`,
        after?.stream ?? "", after?.sequence ?? 0, limit
      )
      .toArray()
      .map(toFact)

  const getMeta = (key: string) => sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", key).toArray()[0]?.value
  const setMeta = (key: string, value: string | undefined) => {
    if (value === undefined) sql.exec("DELETE FROM meta WHERE key = ?", key)
    else sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", key, value)
  }

  return { append, readStream, readShard, outboxSize, pendingOutbox, deleteOutbox, getMeta, setMeta }
}
