/**
 * What a reshard asks of a shard's cold manifest (ColdSegments.ts): which streams have cold history (a moving stream
 * may be wholly cold), their ranges (ColdHistory reads their fact ids from the segments), and forgetting the
 * manifest rows of streams that moved to another shard. It does not touch R2: the segments' objects stay until the
 * tenant's deletion.
 */
import * as Schema from "effect/Schema"
import * as ColdSegments from "./ColdSegments.js"
import { decodeCount, decoder, jsonArrays, type Shard } from "./LedgerRows.js"

const decodeStreamName = decoder(Schema.Struct({ stream: Schema.String }))

/** The streams with cold history (any of their facts in `cold_ranges`). */
export const streams = (s: Shard): Array<string> =>
  !ColdSegments.hasCold(s) ? [] : Array.from(s.sql.exec("SELECT DISTINCT stream FROM cold_ranges"), (raw) => decodeStreamName(raw).stream)

/** The cold ranges of these streams (by name), in shard order. */
export const rangesOf = (s: Shard, names: ReadonlyArray<string>): Array<ColdSegments.ColdRange> => {
  if (names.length === 0 || !ColdSegments.hasCold(s)) return []
  const found: Array<ColdSegments.ColdRange> = []
  for (const chunk of jsonArrays(names.map((name) => JSON.stringify(name)))) {
    for (const raw of s.sql.exec(
      `SELECT r.stream, r.first_sequence, r.last_sequence, g.object_key FROM cold_ranges r JOIN cold_segments g ON g.id = r.segment
       WHERE r.stream IN (SELECT value FROM json_each(?)) ORDER BY r.tenant_id, r.stream, r.first_sequence`,
      chunk
    )) found.push(ColdSegments.readRange(raw))
  }
  return found
}

/**
 * Forgets these streams' cold history, inside the caller's transaction (a reshard's drop, once the streams live in
 * their new shard): their `cold_ranges` rows (their packed fact ids with them) and, on a shard tiered before the
 * packed ids, their facts' legacy `cold_facts` rows (`factIds`: every cold fact id of the streams, read from their
 * segments by the caller), each segment's count lowered by the facts it no longer names and a segment naming none
 * left out of the manifest. The segments' objects stay in R2 (other streams' facts share them) until the tenant's
 * deletion removes its prefix. Throws, forgetting nothing, when `factIds` are not exactly the streams' cold facts
 * (more turned cold since they were read: the caller reads again).
 */
export const forget = (s: Shard, names: ReadonlyArray<string>, factIds: ReadonlyArray<string>): void => {
  if (names.length === 0 || !ColdSegments.hasCold(s)) return
  const list = JSON.stringify(names)
  const expected = decodeCount(s.sql.exec(
    "SELECT COALESCE(SUM(last_sequence - first_sequence + 1), 0) AS n FROM cold_ranges WHERE stream IN (SELECT value FROM json_each(?))", list
  ).one()).n
  const legacy = ColdSegments.hasLegacyIndex(s)
  let located = 0
  for (const chunk of jsonArrays(factIds.map((id) => JSON.stringify(id)))) {
    // Named by the streams' ranges (their packed ids), or by the legacy index for ranges tiered before them.
    located += decodeCount(s.sql.exec(
      `SELECT COUNT(*) AS n FROM cold_ranges r, json_each(r.fact_ids) AS i
       WHERE r.fact_ids IS NOT NULL AND r.stream IN (SELECT value FROM json_each(?1)) AND i.value IN (SELECT value FROM json_each(?2))`,
      list, chunk
    ).one()).n
    if (legacy) located += decodeCount(s.sql.exec("SELECT COUNT(*) AS n FROM cold_facts WHERE fact_id IN (SELECT value FROM json_each(?))", chunk).one()).n
  }
  if (new Set(factIds).size !== factIds.length || located !== factIds.length || located !== expected) {
    throw new Error(`the cold history of ${names.length} stream(s) changed while it was read (${located} of ${expected} cold facts named); read it again`)
  }
  s.sql.exec(
    `UPDATE cold_segments SET facts = facts - (
       SELECT COALESCE(SUM(r.last_sequence - r.first_sequence + 1), 0) FROM cold_ranges r WHERE r.segment = cold_segments.id AND r.stream IN (SELECT value FROM json_each(?1))
     ) WHERE id IN (SELECT segment FROM cold_ranges WHERE stream IN (SELECT value FROM json_each(?1)))`,
    list
  )
  if (legacy) for (const chunk of jsonArrays(factIds.map((id) => JSON.stringify(id)))) s.sql.exec("DELETE FROM cold_facts WHERE fact_id IN (SELECT value FROM json_each(?))", chunk)
  s.sql.exec("DELETE FROM cold_ranges WHERE stream IN (SELECT value FROM json_each(?))", list)
  s.sql.exec("DELETE FROM cold_segments WHERE facts <= 0")
}
