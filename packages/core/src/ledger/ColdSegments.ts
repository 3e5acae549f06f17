/**
 * A ledger shard's cold history, its SQLite side: the manifest of the R2 segments that hold the facts tiered out
 * of `facts` (ColdHistory.ts writes and reads the segments), kept in two tables created by the shard's first
 * tiering (a shard never tiered has none, and answers as before):
 *
 * - `cold_segments` — one row per segment: its object key, how many facts, bytes, the oldest and newest
 *   `created_at` in it;
 * - `cold_ranges` — which segment holds which sequences of which stream (one row per stream and segment), with
 *   the range's fact ids packed in sequence order (`fact_ids`, a JSON array: ~37 bytes a fact, no row per fact,
 *   so tiering writes one row per fact — the hot delete — plus a row per stream and segment). An append judges
 *   a re-appended id against its own stream's ranges (`locateInStreams`), so a redelivered decision of a cold fact
 *   is a duplicate as it was when hot; a fact by id alone (`find`) scans the shard's ranges: the slow path.
 *
 * Shards tiered before the packed ids have a third table, `cold_facts` (`fact_id` → segment, one row per fact),
 * and `cold_ranges` rows whose `fact_ids` is null: both lookups still answer from it; nothing writes it any more,
 * and ColdForget forgets from both.
 *
 * The cold part of a stream is always a prefix (sequences 1…k cold, k+1… hot): `candidates` takes each stream's
 * facts in sequence order while they are older than the cutoff and nothing still needs them hot (an outbox row,
 * a pending timer), and `record` — one `transactionSync` — records the manifest and deletes exactly the hot rows
 * of a segment already written and verified, after checking they are still there, unchanged in place and
 * unpinned, and that each stream's run starts right after its cold part. A stream's version is the larger of its
 * hot `MAX(sequence)` and its cold ranges' last sequence.
 *
 * It does not read or write R2 (ColdHistory.ts does), nor decide when to tier (the scheduled sweep, operations/ColdTiering.ts);
 * what a reshard asks of the manifest (its cold streams, forgetting those that moved) is ColdForget.ts's.
 */
import * as Schema from "effect/Schema"
import type { ColdStats } from "./ColdProtocol.js"
import type { StreamKey } from "./LedgerProtocol.js"
import { decodeCount, decodeFactRow, decoder, exists, type FactRow, jsonArrays, type Shard } from "./LedgerRows.js"

export const schema = [
  `CREATE TABLE IF NOT EXISTS cold_segments (
    id INTEGER PRIMARY KEY,
    object_key TEXT NOT NULL UNIQUE,
    facts INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    oldest TEXT NOT NULL,
    newest TEXT NOT NULL,
    tiered_at TEXT NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS cold_ranges (
    tenant_id TEXT NOT NULL,
    stream TEXT NOT NULL,
    first_sequence INTEGER NOT NULL,
    last_sequence INTEGER NOT NULL,
    segment INTEGER NOT NULL,
    fact_ids TEXT,
    PRIMARY KEY (tenant_id, stream, first_sequence)
  ) WITHOUT ROWID`
]

const decodeDefinition = decoder(Schema.Struct({ sql: Schema.String }))

/**
 * Adds `cold_ranges.fact_ids` to a shard tiered before it (its ranges' ids are in `cold_facts`), once per object,
 * and learns whether that legacy index is there to consult (a table with rows: only a reshard's forget empties it).
 */
const upgrade = (s: Shard) => {
  if (s.coldUpgraded === true) return
  const definition = s.sql.exec("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'cold_ranges'").toArray()[0]
  if (definition !== undefined && !/\bfact_ids\b/.test(decodeDefinition(definition).sql)) s.sql.exec("ALTER TABLE cold_ranges ADD COLUMN fact_ids TEXT")
  s.legacyColdFacts = decodeCount(s.sql.exec("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'cold_facts'").one()).n > 0 &&
    s.sql.exec("SELECT 1 FROM cold_facts LIMIT 1").toArray().length > 0
  s.coldUpgraded = true
}

/** Whether the shard has the legacy per-fact index (`cold_facts`, written before the packed ids) to consult. */
export const hasLegacyIndex = (s: Shard): boolean => {
  upgrade(s)
  return s.legacyColdFacts === true
}

/** The `meta` key of the tiering walk's place: the JSON `[tenant, stream]` of the last stream looked at. */
const cursorKey = "tier_cursor"

/** Streams looked at per `candidates` call at most: a shard whose heads are all hot costs this many seeks. */
export const streamsPerCall = 2_000
/** Rows read per page of one stream's head. */
const headPage = 64

/** A stream's run of cold sequences in one segment. */
export interface ColdRange {
  readonly stream: string
  readonly first: number
  readonly last: number
  readonly objectKey: string
}

/** A chunk the walk found to tier, and where the walk stands after it. */
export interface Candidates {
  readonly rows: ReadonlyArray<FactRow>
  readonly cursor: readonly [string, string]
  /** The walk reached the last stream (the cursor is back at the start). */
  readonly wrapped: boolean
}

const decodeRange = decoder(Schema.Struct({ stream: Schema.String, first_sequence: Schema.Number, last_sequence: Schema.Number, object_key: Schema.String }))
const decodeLocated = decoder(Schema.Struct({ fact_id: Schema.String, object_key: Schema.String }))
const decodeLast = decoder(Schema.Struct({ v: Schema.Number }))
const decodeStreamHead = decoder(Schema.Struct({ tenant_id: Schema.String, stream: Schema.String }))
const decodeId = decoder(Schema.Struct({ fact_id: Schema.String }))
const decodeStats = decoder(Schema.Struct({
  segments: Schema.Number, facts: Schema.NullOr(Schema.Number), bytes: Schema.NullOr(Schema.Number), oldest: Schema.NullOr(Schema.String), newest: Schema.NullOr(Schema.String)
}))
const decodeMeta = decoder(Schema.Struct({ value: Schema.String }))

/** Whether the shard has cold history (its manifest tables hold a segment). Learned once per object: only `record` turns it true. */
export const hasCold = (s: Shard): boolean => {
  if (s.cold !== undefined) return s.cold
  if (!exists(s)) return false
  const tables = decodeCount(s.sql.exec("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'cold_segments'").one()).n
  s.cold = tables > 0 && s.sql.exec("SELECT 1 FROM cold_segments LIMIT 1").toArray().length > 0
  if (s.cold) upgrade(s)
  return s.cold
}

/** A stream's last cold sequence (0: none cold). */
export const last = (s: Shard, key: StreamKey): number =>
  !hasCold(s) ? 0 : decodeLast(s.sql.exec("SELECT COALESCE(MAX(last_sequence), 0) AS v FROM cold_ranges WHERE tenant_id = ? AND stream = ?", key.tenant_id, key.stream).one()).v

/** A stream's cold ranges holding sequences after `after`, in sequence order. */
export const ranges = (s: Shard, key: StreamKey, after: number): Array<ColdRange> =>
  !hasCold(s) ? [] : Array.from(
    s.sql.exec(
      `SELECT r.stream, r.first_sequence, r.last_sequence, g.object_key FROM cold_ranges r JOIN cold_segments g ON g.id = r.segment
       WHERE r.tenant_id = ? AND r.stream = ? AND r.last_sequence > ? ORDER BY r.first_sequence`,
      key.tenant_id, key.stream, after
    ),
    (raw) => toRange(decodeRange(raw))
  )

const toRange = (row: ReturnType<typeof decodeRange>): ColdRange => ({ stream: row.stream, first: row.first_sequence, last: row.last_sequence, objectKey: row.object_key })
/** A `cold_ranges` row joined with its segment's `object_key`, decoded. */
export const readRange = (raw: unknown): ColdRange => toRange(decodeRange(raw))

/**
 * The shard's cold ranges holding positions after a `(stream, sequence)` cursor, in shard order (stream, sequence),
 * until they hold at least `facts` facts after it (or none are left).
 */
export const rangesAfter = (s: Shard, after: { readonly stream: string; readonly sequence: number } | undefined, facts: number): Array<ColdRange> => {
  if (!hasCold(s)) return []
  const found: Array<ColdRange> = []
  let count = 0
  let position = { stream: after?.stream ?? "", sequence: after?.sequence ?? 0 }
  // Ranges of one stream are disjoint and ordered: "holds a position after the cursor" is "last_sequence after it".
  for (;;) {
    const page = Array.from(
      s.sql.exec(
        `SELECT r.stream, r.first_sequence, r.last_sequence, g.object_key FROM cold_ranges r JOIN cold_segments g ON g.id = r.segment
         WHERE r.stream > ? OR (r.stream = ? AND r.last_sequence > ?) ORDER BY r.tenant_id, r.stream, r.first_sequence LIMIT 100`,
        position.stream, position.stream, position.sequence
      ),
      (raw) => toRange(decodeRange(raw))
    )
    for (const range of page) {
      found.push(range)
      count += range.last - Math.max(range.first - 1, range.stream === (after?.stream ?? "") ? after?.sequence ?? 0 : 0)
      if (count >= facts) return found
    }
    if (page.length < 100) return found
    const end = page.at(-1)!
    position = { stream: end.stream, sequence: end.last }
  }
}

/** A fact id wanted in one stream's cold history. */
export interface Wanted {
  readonly tenant_id: string
  readonly stream: string
  readonly fact_id: string
}

/** The legacy index's answer for these ids (a shard tiered before the packed ids; see `hasLegacyIndex`). */
const locateLegacy = (s: Shard, ids: ReadonlyArray<string>, located: Map<string, string>) => {
  if (ids.length === 0 || !hasLegacyIndex(s)) return
  for (const chunk of jsonArrays(ids.map((id) => JSON.stringify(id)))) {
    for (const raw of s.sql.exec(
      `SELECT c.fact_id, g.object_key FROM cold_facts c JOIN cold_segments g ON g.id = c.segment WHERE c.fact_id IN (SELECT value FROM json_each(?))`,
      chunk
    )) {
      const row = decodeLocated(raw)
      located.set(row.fact_id, row.object_key)
    }
  }
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
  for (const chunk of jsonArrays(wanted.map((w) => JSON.stringify([w.tenant_id, w.stream, w.fact_id, JSON.stringify(w.fact_id)])))) {
    for (const raw of s.sql.exec(
      `SELECT q.value ->> 2 AS fact_id, g.object_key FROM json_each(?) AS q
       JOIN cold_ranges r ON r.tenant_id = q.value ->> 0 AND r.stream = q.value ->> 1
       JOIN cold_segments g ON g.id = r.segment
       WHERE r.fact_ids IS NOT NULL AND ${holds("r.fact_ids", "q.value ->> 3", "q.value ->> 2")}`,
      chunk
    )) {
      const row = decodeLocated(raw)
      located.set(row.fact_id, row.object_key)
    }
  }
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
  for (const chunk of jsonArrays(rest.map((id) => JSON.stringify([id, JSON.stringify(id)])))) {
    for (const raw of s.sql.exec(
      `SELECT q.value ->> 0 AS fact_id, g.object_key FROM json_each(?) AS q
       JOIN cold_ranges r ON r.fact_ids IS NOT NULL AND ${holds("r.fact_ids", "q.value ->> 1", "q.value ->> 0")}
       JOIN cold_segments g ON g.id = r.segment`,
      chunk
    )) {
      const row = decodeLocated(raw)
      located.set(row.fact_id, row.object_key)
    }
  }
  locateLegacy(s, rest.filter((id) => !located.has(id)), located)
  return located
}

const readCursor = (s: Shard): readonly [string, string] => {
  const raw = s.sql.exec("SELECT value FROM meta WHERE key = ?", cursorKey).toArray()[0]
  if (raw === undefined) return ["", ""]
  try {
    const value = JSON.parse(decodeMeta(raw).value) as unknown
    return Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === "string") ? [value[0] as string, value[1] as string] : ["", ""]
  } catch {
    return ["", ""]
  }
}

/** Records where the walk stands (a walk that found nothing to tier moves on without a segment). */
export const setCursor = (s: Shard, cursor: readonly [string, string]) => {
  s.sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", cursorKey, JSON.stringify(cursor))
}

/** Of these fact ids, those something still needs hot: an outbox row waiting, a timer pending. */
const pinned = (s: Shard, ids: ReadonlyArray<string>): Set<string> => {
  const found = new Set<string>()
  for (const chunk of jsonArrays(ids.map((id) => JSON.stringify(id)))) {
    for (const raw of s.sql.exec(
      `SELECT fact_id FROM outbox WHERE fact_id IN (SELECT value FROM json_each(?1))
       UNION SELECT timer_id AS fact_id FROM timers WHERE status = 'pending' AND timer_id IN (SELECT value FROM json_each(?1))`,
      chunk
    )) found.add(decodeId(raw).fact_id)
  }
  return found
}

/**
 * The next chunk to tier: walking streams from the cursor, each stream's head — its facts in sequence order while
 * created before `cutoff` (ISO-8601) and not pinned — at most `limit` facts and `streamsPerCall` streams.
 */
export const candidates = (s: Shard, cutoff: string, limit: number): Candidates => {
  if (!exists(s)) return { rows: [], cursor: ["", ""], wrapped: true }
  let cursor = readCursor(s)
  const rows: Array<FactRow> = []
  for (let visited = 0; visited < streamsPerCall && rows.length < limit; visited++) {
    const next = s.sql.exec("SELECT tenant_id, stream FROM facts WHERE (tenant_id, stream) > (?, ?) ORDER BY tenant_id, stream, sequence LIMIT 1", ...cursor).toArray()[0]
    if (next === undefined) return { rows, cursor: ["", ""], wrapped: true }
    const stream = decodeStreamHead(next)
    let complete = false
    for (let after = 0; !complete;) {
      const room = Math.min(headPage, limit - rows.length)
      if (room === 0) break
      const page = Array.from(
        s.sql.exec("SELECT * FROM facts WHERE tenant_id = ? AND stream = ? AND sequence > ? ORDER BY sequence LIMIT ?", stream.tenant_id, stream.stream, after, room),
        decodeFactRow
      )
      const held = pinned(s, page.map((row) => row.fact_id))
      for (const row of page) {
        if (row.created_at >= cutoff || held.has(row.fact_id)) {
          complete = true
          break
        }
        rows.push(row)
        after = row.sequence
      }
      if (page.length < room) complete = true
    }
    // A stream cut short by the limit is looked at again by the next call.
    if (!complete) return { rows, cursor, wrapped: false }
    cursor = [stream.tenant_id, stream.stream]
  }
  return { rows, cursor, wrapped: false }
}

/** A written and verified segment, to record. */
export interface Segment {
  readonly objectKey: string
  readonly bytes: number
  /** Its facts, as read from `facts` (sorted by stream, sequence). */
  readonly rows: ReadonlyArray<FactRow>
  readonly cursor: readonly [string, string]
  readonly tieredAt: string
}

/**
 * Records the segment and deletes its facts' hot rows, in one transaction — only when each is still stored hot
 * as read (same stream and sequence), none is pinned now, and each stream's run starts right after its cold part.
 * Returns whether it was recorded (false: the shard changed while the segment was written; nothing was).
 */
export const record = (s: Shard, segment: Segment): boolean =>
  s.storage.transactionSync(() => {
    for (const statement of schema) s.sql.exec(statement)
    upgrade(s)
    const ids = segment.rows.map((row) => row.fact_id)
    let still = 0
    for (const chunk of jsonArrays(segment.rows.map((row) => JSON.stringify([row.fact_id, row.stream, row.sequence])))) {
      still += decodeCount(s.sql.exec(
        `SELECT COUNT(*) AS n FROM json_each(?) AS r JOIN facts f ON f.fact_id = r.value ->> 0 AND f.stream = r.value ->> 1 AND f.sequence = r.value ->> 2`,
        chunk
      ).one()).n
    }
    if (still !== ids.length || pinned(s, ids).size > 0) return false
    const runs = new Map<string, { tenant_id: string; stream: string; first: number; last: number; ids: Array<string> }>()
    for (const row of segment.rows) {
      const run = runs.get(row.stream)
      if (run === undefined) runs.set(row.stream, { tenant_id: row.tenant_id, stream: row.stream, first: row.sequence, last: row.sequence, ids: [row.fact_id] })
      else if (row.sequence !== run.last + 1) return false
      else {
        run.last = row.sequence
        run.ids.push(row.fact_id)
      }
    }
    for (const run of runs.values()) if (last(s, run) !== run.first - 1) return false
    const created = segment.rows.map((row) => row.created_at).sort()
    const id = decodeLast(s.sql.exec(
      "INSERT INTO cold_segments (object_key, facts, bytes, oldest, newest, tiered_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id AS v",
      segment.objectKey, ids.length, segment.bytes, created[0]!, created.at(-1)!, segment.tieredAt
    ).one()).v
    s.cold = true
    // Each range's ids packed in its row (a JSON array as text, in sequence order): no row per cold fact.
    for (const chunk of jsonArrays([...runs.values()].map((run) => JSON.stringify([run.tenant_id, run.stream, run.first, run.last, JSON.stringify(run.ids)])))) {
      s.sql.exec(
        `INSERT INTO cold_ranges (tenant_id, stream, first_sequence, last_sequence, segment, fact_ids)
         SELECT r.value ->> 0, r.value ->> 1, r.value ->> 2, r.value ->> 3, ?, r.value ->> 4 FROM json_each(?) AS r`,
        id, chunk
      )
    }
    for (const chunk of jsonArrays(ids.map((factId) => JSON.stringify(factId)))) {
      s.sql.exec("DELETE FROM facts WHERE fact_id IN (SELECT value FROM json_each(?))", chunk)
    }
    setCursor(s, segment.cursor)
    return true
  })

/** The manifest's totals. */
export const stats = (s: Shard): ColdStats => {
  if (!hasCold(s)) return { segments: 0, facts: 0, bytes: 0, oldest: null, newest: null }
  const row = decodeStats(s.sql.exec("SELECT COUNT(*) AS segments, SUM(facts) AS facts, SUM(bytes) AS bytes, MIN(oldest) AS oldest, MAX(newest) AS newest FROM cold_segments").one())
  return { segments: row.segments, facts: row.facts ?? 0, bytes: row.bytes ?? 0, oldest: row.oldest, newest: row.newest }
}
