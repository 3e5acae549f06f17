/**
 * One append call inside a ledger shard (LedgerStorage.appendAll): its groups judged in order against what is
 * stored and what the groups before them appended, written in one `transactionSync` and a fixed number of
 * statements — one read of every fact id they carry (hot rows, and — looked up in their own stream's cold ranges —
 * the cold ones' rows the caller read from R2),
 * one of every stream's version (cold facts counted), one insert of every new fact — with the timers and
 * deciders' snapshots the appended facts set. Reads, the outbox and timers' firing are LedgerStorage's.
 */
import * as Schema from "effect/Schema"
import type { Fact } from "@factline/schemas"
import type { AppendGroup, AppendResult } from "./LedgerProtocol.js"
import { decodeFactRow, decoder, ensureSchema, type FactRow, jsonArrays, judge, keyOf, type Shard, toRow } from "./LedgerRows.js"
import * as ColdIds from "./ColdIds.js"
import * as ColdSegments from "./ColdSegments.js"
import * as LedgerSnapshots from "./LedgerSnapshots.js"
import * as LedgerTimers from "./LedgerTimers.js"

/**
 * An append met a cold fact id whose row the caller did not bring (it turned cold while the caller read the others
 * from R2): nothing was written; the caller reads again and retries (ColdHistory.append).
 */
export class ColdFactsUnread extends Error {
  constructor(readonly factIds: ReadonlyArray<string>) {
    super(`${factIds.length} re-appended fact id(s) are in cold history and were not read`)
  }
}

const decodeStreamVersion = decoder(Schema.Struct({ tenant_id: Schema.String, stream: Schema.String, v: Schema.Number }))

/**
 * The groups of one call, in order, in one transaction and a fixed number of statements whatever their
 * count: one read of every fact id they carry, one of every stream's version (one index seek each), one
 * insert of every new fact (its rows as one JSON parameter: a Durable Object binds at most 100 parameters).
 * Each group is judged against what is stored and what the groups before it appended, as if appended alone.
 */
export const appendAll = (s: Shard, groups: ReadonlyArray<AppendGroup>, cold?: ReadonlyMap<string, FactRow>): Array<AppendResult> => {
  if (groups.length === 0) return []
  ensureSchema(s)
  return s.storage.transactionSync(() => appendAllWithin(s, groups, cold))
}

/** The stored rows of the given fact ids, by id: hot rows, and the cold ones' rows from `cold` (ColdFactsUnread when one is missing). */
const storedFacts = (s: Shard, groups: ReadonlyArray<AppendGroup>, cold?: ReadonlyMap<string, FactRow>) => {
  const ids = groups.flatMap((group) => group.facts.map((draft) => draft.fact_id))
  const stored = new Map<string, FactRow>()
  for (const chunk of jsonArrays(ids.map((id) => JSON.stringify(id)))) {
    for (const raw of s.sql.exec("SELECT * FROM facts WHERE fact_id IN (SELECT value FROM json_each(?))", chunk)) {
      const row = decodeFactRow(raw)
      stored.set(row.fact_id, row)
    }
  }
  // A fact tiered to R2 is stored all the same: its id is judged as it was when hot, against its own stream's cold
  // ranges (one statement per call, reading the call's streams' ranges). A shard without cold history (the object's
  // cached flag) builds no list and runs no statement.
  const unread: Array<string> = []
  const wanted = ColdSegments.hasCold(s) ? ColdIds.wantedOf(groups, stored) : []
  for (const id of ColdIds.locateInStreams(s, wanted).keys()) {
    const row = cold?.get(id)
    if (row === undefined) unread.push(id)
    else stored.set(id, row)
  }
  if (unread.length > 0) throw new ColdFactsUnread(unread)
  return stored
}

/** Each group's stream version, by `keyOf`. */
const streamVersions = (s: Shard, groups: ReadonlyArray<AppendGroup>) => {
  const versions = new Map<string, number>()
  // A stream's cold part is a prefix: its last cold sequence counts only when no fact of it is hot.
  const coldVersion = ColdSegments.hasCold(s)
    ? "(SELECT MAX(last_sequence) FROM cold_ranges WHERE tenant_id = k.value ->> 0 AND stream = k.value ->> 1)"
    : "NULL"
  for (const chunk of jsonArrays([...new Set(groups.map(keyOf))])) {
    for (const raw of s.sql.exec(
      `SELECT k.value ->> 0 AS tenant_id, k.value ->> 1 AS stream,
         COALESCE((SELECT MAX(sequence) FROM facts WHERE tenant_id = k.value ->> 0 AND stream = k.value ->> 1), ${coldVersion}, 0) AS v
       FROM json_each(?) AS k`,
      chunk
    )) {
      const row = decodeStreamVersion(raw)
      versions.set(keyOf(row), row.v)
    }
  }
  return versions
}

/** Inserts the rows of the facts appended, as JSON parameters. */
const insertFacts = (s: Shard, rows: ReadonlyArray<FactRow>) => {
  const texts = rows.map((row) =>
    JSON.stringify([
      row.fact_id, row.tenant_id, row.stream, row.sequence, row.type, row.data,
      row.causation_id, row.correlation_id, row.caused_by, row.created_at, row.traceparent, row.schema_version
    ]))
  for (const chunk of jsonArrays(texts)) {
    s.sql.exec(
      `INSERT INTO facts (fact_id, tenant_id, stream, sequence, type, data, causation_id, correlation_id, caused_by, created_at, traceparent, schema_version)
       SELECT r.value ->> 0, r.value ->> 1, r.value ->> 2, r.value ->> 3, r.value ->> 4, r.value ->> 5, r.value ->> 6, r.value ->> 7, r.value ->> 8, r.value ->> 9, r.value ->> 10, r.value ->> 11
       FROM json_each(?) AS r`,
      chunk
    )
  }
}

/** `appendAll` inside the caller's transaction. */
export const appendAllWithin = (s: Shard, groups: ReadonlyArray<AppendGroup>, cold?: ReadonlyMap<string, FactRow>): Array<AppendResult> => {
  const stored = storedFacts(s, groups, cold)
  const versions = streamVersions(s, groups)
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
    insertFacts(s, appended.map((fact) => stored.get(fact.fact_id)!))
    LedgerTimers.applyTimerFacts(s.sql, appended)
  }
  LedgerSnapshots.writeAppended(s, groups, results)
  return results
}
