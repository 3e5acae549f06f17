/**
 * Where a shard's cold fact ids are (ColdSegments.ts keeps the manifest): packed in their stream runs' `cold_ranges`
 * rows, or — on a shard tiered before the packed ids — in the legacy per-fact index `cold_facts`.
 *
 * - `locateInStreams`: each id looked up in its own stream's ranges only — what an append judges a re-appended id
 *   against (one statement per call, bounded by the call's streams), so a redelivered decision of a cold fact is a
 *   duplicate as it was when hot. An id cold in another stream of the shard is not found.
 * - `find`: an id anywhere in the shard — trace by id, a workflow's start — the slow path: a scan of the shard's
 *   ranges, only for the ids not found hot.
 *
 * It does not read R2 (ColdHistory.ts does) nor write the manifest.
 */
import * as Schema from "effect/Schema"
import type { AppendGroup } from "./LedgerProtocol.js"
import { hasCold, hasLegacyIndex } from "./ColdSegments.js"
import { decoder, jsonArrays, type Shard } from "./LedgerRows.js"

const decodeLocated = decoder(Schema.Struct({ fact_id: Schema.String, object_key: Schema.String }))
const decodeId = decoder(Schema.Struct({ fact_id: Schema.String }))

/** A fact id wanted in one stream's cold history. */
export interface Wanted {
  readonly tenant_id: string
  readonly stream: string
  readonly fact_id: string
}

/** Each fact id of these groups wanted in its group's stream (`skip`: ids already found, e.g. hot): what an append judges. */
export const wantedOf = (groups: ReadonlyArray<AppendGroup>, skip?: ReadonlySet<string> | ReadonlyMap<string, unknown>): Array<Wanted> =>
  groups.flatMap((group) =>
    group.facts.filter((draft) => skip?.has(draft.fact_id) !== true).map((draft) => ({ tenant_id: group.tenant_id, stream: group.stream, fact_id: draft.fact_id })))

/** Runs `query` (one JSON array parameter) over `items` in chunks, each answer row `(fact_id, object_key)` set in `located`. */
const collect = (s: Shard, query: string, items: ReadonlyArray<string>, located: Map<string, string>) => {
  for (const chunk of jsonArrays(items)) {
    for (const raw of s.sql.exec(query, chunk)) {
      const row = decodeLocated(raw)
      located.set(row.fact_id, row.object_key)
    }
  }
}

/** The legacy index's answer for these ids (a shard tiered before the packed ids; see `hasLegacyIndex`). */
const locateLegacy = (s: Shard, ids: ReadonlyArray<string>, located: Map<string, string>) => {
  if (ids.length === 0 || !hasLegacyIndex(s)) return
  collect(
    s,
    `SELECT c.fact_id, g.object_key FROM cold_facts c JOIN cold_segments g ON g.id = c.segment WHERE c.fact_id IN (SELECT value FROM json_each(?))`,
    ids.map((id) => JSON.stringify(id)),
    located
  )
}

// A range holds an id when its packed array has the id's JSON text (`instr`, the cheap test) as one of its values (exact).
const holds = (ids: string, quoted: string, id: string) =>
  `instr(${ids}, ${quoted}) > 0 AND EXISTS (SELECT 1 FROM json_each(${ids}) AS i WHERE i.value = ${id})`

/**
 * The cold fact ids among `wanted`, each looked up in its own stream's ranges only (one statement per call: rows
 * read are the wanted streams' ranges, whatever the shard holds), with the object key of the segment holding it.
 * An id cold in another stream of the shard is not found: what an append judges is a redelivered decision of the
 * same stream.
 */
export const locateInStreams = (s: Shard, wanted: ReadonlyArray<Wanted>): Map<string, string> => {
  const located = new Map<string, string>()
  if (wanted.length === 0 || !hasCold(s)) return located
  collect(
    s,
    `SELECT q.value ->> 2 AS fact_id, g.object_key FROM json_each(?) AS q
     JOIN cold_ranges r ON r.tenant_id = q.value ->> 0 AND r.stream = q.value ->> 1
     JOIN cold_segments g ON g.id = r.segment
     WHERE r.fact_ids IS NOT NULL AND ${holds("r.fact_ids", "q.value ->> 3", "q.value ->> 2")}`,
    wanted.map((w) => JSON.stringify([w.tenant_id, w.stream, w.fact_id, JSON.stringify(w.fact_id)])),
    located
  )
  locateLegacy(s, wanted.map((w) => w.fact_id).filter((id) => !located.has(id)), located)
  return located
}

/**
 * The cold fact ids among `ids`, wherever they are in the shard, with the object key of the segment holding each:
 * the slow path of a lookup by id alone (trace by id, a workflow's start), which scans every cold range of the
 * shard (rows read: its `cold_ranges` rows) for the ids not found hot (one indexed read of them first).
 */
export const find = (s: Shard, ids: ReadonlyArray<string>): Map<string, string> => {
  const located = new Map<string, string>()
  if (ids.length === 0 || !hasCold(s)) return located
  // A hot id is not cold: only the others cost the scan.
  const hot = new Set<string>()
  for (const chunk of jsonArrays(ids.map((id) => JSON.stringify(id)))) {
    for (const raw of s.sql.exec("SELECT fact_id FROM facts WHERE fact_id IN (SELECT value FROM json_each(?))", chunk)) hot.add(decodeId(raw).fact_id)
  }
  const rest = [...new Set(ids)].filter((id) => !hot.has(id))
  if (rest.length === 0) return located
  collect(
    s,
    `SELECT q.value ->> 0 AS fact_id, g.object_key FROM json_each(?) AS q
     JOIN cold_ranges r ON r.fact_ids IS NOT NULL AND ${holds("r.fact_ids", "q.value ->> 1", "q.value ->> 0")}
     JOIN cold_segments g ON g.id = r.segment`,
    rest.map((id) => JSON.stringify([id, JSON.stringify(id)])),
    located
  )
  locateLegacy(s, rest.filter((id) => !located.has(id)), located)
  return located
}
