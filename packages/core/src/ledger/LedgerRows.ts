/**
 * The ledger shard's tables and rows: the SQLite schema a shard creates on its first write (and the `facts`
 * columns added since, added then), each row's schema and its decoder (compiled once, here at module level:
 * every read decodes its rows, none casts them), how a fact row reads back as a `Fact` and a `Fact` as its row,
 * and how one append group is judged against what is stored. The statements that read and write rows are
 * LedgerStorage's.
 */
import * as Schema from "effect/Schema"
import type { Fact } from "@factline/schemas"
import { type AppendGroup, appendedFacts, type AppendResult, type StreamKey } from "./LedgerProtocol.js"
import * as StableJson from "./StableJson.js"
import * as JsonArrays from "../platform/JsonArrays.js"

/** What the ledger uses of a Durable Object's storage (a `DurableObjectStorage` is one): its SQL and synchronous transactions. */
export interface Storage {
  readonly sql: Pick<SqlStorage, "exec">
  readonly transactionSync: <T>(closure: () => T) => T
}

/** The shard's tables and indexes, each created if missing. */
export const schema = [
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
  // Deciders' snapshots (Handler.Snapshot): one row per stream, decider and snapshot version, rewritten as it moves on.
  `CREATE TABLE IF NOT EXISTS snapshots (
    tenant_id TEXT NOT NULL,
    stream TEXT NOT NULL,
    decider TEXT NOT NULL,
    version INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (tenant_id, stream, decider, version)
  ) WITHOUT ROWID`,
  `CREATE UNIQUE INDEX IF NOT EXISTS timers_pending_name ON timers (tenant_id, stream, name) WHERE status = 'pending'`
]

/** Columns of `facts` added since shards were first created: `ALTER TABLE` for a shard whose table lacks one. */
const addedFactColumns: ReadonlyArray<{ readonly name: string; readonly definition: string }> = [
  { name: "traceparent", definition: "traceparent TEXT" },
  { name: "schema_version", definition: "schema_version INTEGER NOT NULL DEFAULT 1" }
]

/**
 * A decoder of one row schema for a shard's SQLite reads: made once per schema at module level, it returns the
 * row as its schema's type or throws naming the fields at fault — a row that does not match is a bug in the
 * shard's tables or in the read, which the caller sees as the shard's RPC failing, not a value cast to a lie.
 */
export const decoder = <S extends Schema.ConstraintDecoder<unknown>>(row: S): ((input: unknown) => S["Type"]) => Schema.decodeUnknownSync(row)

/** A `facts` row. */
export const FactRow = Schema.Struct({
  fact_id: Schema.String,
  tenant_id: Schema.String,
  stream: Schema.String,
  sequence: Schema.Number,
  type: Schema.String,
  data: Schema.String,
  causation_id: Schema.String,
  correlation_id: Schema.String,
  caused_by: Schema.String,
  created_at: Schema.String,
  /** Null for facts stored before trace context (missing from the rows of a shard not written since). */
  traceparent: Schema.optionalKey(Schema.NullOr(Schema.String)),
  /** Missing from the rows of a shard not written since fact versions (those facts are version 1). */
  schema_version: Schema.optionalKey(Schema.NullOr(Schema.Number))
})
export type FactRow = typeof FactRow.Type
export const decodeFactRow = decoder(FactRow)

/** The one row of `SELECT COUNT(*) AS n …`. */
export const decodeCount = decoder(Schema.Struct({ n: Schema.Number }))
/** The one row of `SELECT sql FROM sqlite_master …`: a table's definition. */
const decodeDefinition = decoder(Schema.Struct({ sql: Schema.String }))

export const toFact = (row: FactRow): Fact => ({
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
export const jsonArrays = (texts: ReadonlyArray<string>) => JsonArrays.jsonArrays(texts, maxJsonParameterChars)

/** A stream's key in one call's maps: its tenant and name as a JSON pair (what the version read sends and answers). */
export const keyOf = (key: StreamKey) => JSON.stringify([key.tenant_id, key.stream])

/** A fact as its row reads back (an appended fact stands in for its row until the call's insert). */
export const toRow = (fact: Fact): FactRow => ({
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

/** One group against the stored facts (and those appended before it in the same call) and its stream's version. */
export const judge = (group: AppendGroup, stored: ReadonlyMap<string, FactRow>, current: number): AppendResult => {
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

/** One shard's storage, and what this object has learned of it (both only ever turn true). */
export interface Shard {
  readonly storage: Storage
  readonly sql: Storage["sql"]
  /** The tables exist. */
  created: boolean
  /** Tables created and every column present: checked once per object, on its first write. */
  upToDate: boolean
  /** Whether the shard has cold history (ColdSegments.hasCold): unknown until first asked; only tiering turns it true. */
  cold?: boolean
  /** `cold_ranges` has its packed ids column (added to a shard tiered before it), checked once per object. */
  coldUpgraded?: boolean
  /** The shard has the legacy cold fact-id index (`cold_facts` with rows: tiered before the packed ids). */
  legacyColdFacts?: boolean
}

/** Whether the shard's tables exist (a never-written shard has none: its reads create nothing). */
export const exists = (s: Shard) =>
  s.created ||= decodeCount(s.sql.exec("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'facts'").one()).n > 0

/** Creates the tables and adds any missing column, once per object (on its first write). */
export const ensureSchema = (s: Shard) => {
  if (s.upToDate) return
  const sql = s.sql
  for (const statement of schema) sql.exec(statement)
  // sqlite_master keeps the table's definition, ALTERs included: a column is added only when it is missing.
  const definition = decodeDefinition(sql.exec("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'facts'").one()).sql
  for (const column of addedFactColumns) {
    if (!new RegExp(`\\b${column.name}\\b`).test(definition)) sql.exec(`ALTER TABLE facts ADD COLUMN ${column.definition}`)
  }
  s.created = true
  s.upToDate = true
}
