/**
 * A ledger shard's cold history, its SQLite side: the manifest of the R2 segments that hold the facts tiered out
 * of `facts` (ColdHistory.ts writes and reads the segments), kept in two tables created by the shard's first
 * tiering (a shard never tiered has none, and answers as before):
 *
 * - `cold_segments` — one row per segment: its object key, how many facts, bytes, the oldest and newest
 *   `created_at` in it;
 * - `cold_ranges` — which segment holds which sequences of which stream (one row per stream and segment), with
 *   the range's fact ids packed in sequence order (`fact_ids`, a JSON array: ~37 bytes a fact, no row per fact,
 *   so tiering writes one row per fact — the hot delete — plus a row per stream and segment). Looking an id up in
 *   them is ColdIds.ts's.
 *
 * Shards tiered before the packed ids have a third table, `cold_facts` (`fact_id` → segment, one row per fact),
 * and `cold_ranges` rows whose `fact_ids` is null: `upgrade` adds the column, ColdIds' lookups still answer from
 * the legacy rows; nothing writes them any more, and ColdForget forgets from both.
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
 * Adds `cold_ranges.fact_ids` to a shard tiered before it (its ranges' ids are in `cold_facts`), once per object —
 * `record` checks again (`always`): a transaction rolled back may have undone the column this object added — and
 * learns whether that legacy index is there to consult (a table with rows: only a reshard's forget empties it).
 */
const upgrade = (s: Shard, always = false) => {
  if (s.coldUpgraded === true && !always) return
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
    upgrade(s, true)
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
