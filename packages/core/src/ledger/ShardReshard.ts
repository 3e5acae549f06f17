/**
 * One ledger shard's side of a reshard (Reshard.ts drives it): which of its streams it still answers, and the
 * calls that hold, copy out, switch, drop and import them.
 *
 * A shard that took part in a reshard records its place in its `meta` (`reshard`): its `index` among `shards`
 * (the streams it owns are those with `hash(stream) % shards === index`) and, while a reshard raises the count,
 * `next` — the new count and the stage: `held` (appends to the moving streams are refused `held`, retryable,
 * while they are copied) or `switched` (the moving streams are answered `moved` with the new count: the ledger
 * client routes them there). A stream that left in an earlier reshard is answered `moved` too. The OLD shard is
 * the authority: a caller whose cached topology is stale reaches it, is told, and corrects itself, so no
 * isolate needs to be told of a switch. Everything is in the object's own storage, so the refusal is decided in
 * the same single-threaded turn as the append it refuses — no append slips between a hold and the copy.
 *
 * Held and switched shards fire no timers (`firingPaused`): a moving stream's timer fires once, in its new shard,
 * after the switch (an unmoved stream's timer waits for the drop, a few seconds), and tier nothing.
 *
 * Cold history: the operation copies facts through the shard's read calls (ColdHistory's, cold facts with the hot
 * ones) and the new shard writes them all hot, from sequence 1 (they tier again by age). The moving streams are
 * found in the cold manifest too (a stream may be wholly cold), and the drop forgets their cold ranges and cold fact
 * ids with their hot rows, in the same transaction — the old shard then reports nothing of them (no version, no
 * fact in its walks, no id judged stored). The cold ids are read from the segments by the caller (`drop`'s
 * `coldIdsOf`, ColdHistory), as this module only touches SQLite.
 */
import * as Schema from "effect/Schema"
import type { AppendGroup, Handover, HandoverAnswer, ReshardExtras, ReshardImport, ShardRefusal } from "./LedgerProtocol.js"
import { decoder, ensureSchema, exists, jsonArrays, type Shard, type Storage, toRow } from "./LedgerRows.js"
import type { LedgerStorage } from "./LedgerStorage.js"
import * as Shards from "./Shards.js"

/** What a shard records of its place in its tenant's reshards. */
export interface Place {
  readonly index: number
  readonly shards: number
  readonly next?: { readonly shards: number; readonly stage: "held" | "switched" }
}

const decodePlace = decoder(Schema.Struct({
  index: Schema.Number,
  shards: Schema.Number,
  next: Schema.optionalKey(Schema.Struct({ shards: Schema.Number, stage: Schema.Literals(["held", "switched"]) }))
}))
const decodeStream = decoder(Schema.Struct({ stream: Schema.String }))
const Row = Schema.Record(Schema.String, Schema.Union([Schema.String, Schema.Number, Schema.Null]))
const decodeRow = decoder(Row)
const decodeOutbox = decoder(Schema.Struct({ fact_id: Schema.String, stream: Schema.String, destination: Schema.String, created_at: Schema.String }))

export const metaKey = "reshard"

export interface ShardReshard {
  /** Why this stream is not answered here, if it is not. */
  readonly refusal: (stream: string) => ShardRefusal | undefined
  /** Each group's refusal (undefined: append it). */
  readonly refusals: (groups: ReadonlyArray<AppendGroup>) => Array<ShardRefusal | undefined>
  /** Hands over the entries whose streams are answered here; the others are answered `moved`. */
  readonly handover: (entries: ReadonlyArray<Handover>) => HandoverAnswer
  /** While a reshard holds or has switched this shard (until its moved streams are dropped): timers wait. */
  readonly firingPaused: () => boolean
  readonly hold: (index: number, from: number, to: number) => void
  readonly extras: () => ReshardExtras
  readonly switch: () => ReshardExtras["outbox"]
  /**
   * Deletes up to `streams` moved streams (after the switch), their cold history with them: `coldIdsOf` reads the
   * cold fact ids of the streams dropped (ColdHistory.coldIdsOf).
   */
  readonly drop: (
    streams: number,
    coldIdsOf: (streams: ReadonlyArray<string>) => Promise<ReadonlyArray<string>>
  ) => Promise<{ readonly dropped: number; readonly remaining: number }>
  readonly release: () => void
  readonly import: (input: ReshardImport) => number
}

/** A shard's streams that its current reshard moves (from its facts, timers, snapshots and cold history). */
const movingStreams = (s: Shard, p: Place | null, coldStreams: () => ReadonlyArray<string>): Array<string> => {
  if (p?.next === undefined || !exists(s)) return []
  const streams = new Set<string>(coldStreams())
  for (const table of ["facts", "timers", "snapshots"]) {
    for (const raw of s.sql.exec(`SELECT DISTINCT stream FROM ${table}`)) streams.add(decodeStream(raw).stream)
  }
  return [...streams].filter((stream) => Shards.hash(stream) % p.next!.shards !== p.index).sort()
}

/** Rows of a query over these streams (a JSON parameter, split at the shard's parameter size). */
const each = <T>(s: Shard, streams: ReadonlyArray<string>, query: string, decode: (raw: unknown) => T): Array<T> => {
  const out: Array<T> = []
  for (const chunk of jsonArrays(streams.map((stream) => JSON.stringify(stream)))) {
    for (const raw of s.sql.exec(query, chunk)) out.push(decode(raw))
  }
  return out
}

/** The outbox rows waiting for these streams' facts. */
const outboxRows = (s: Shard, streams: ReadonlyArray<string>) =>
  exists(s) ? each(s, streams, "SELECT o.fact_id, f.stream, o.destination, o.created_at FROM outbox o JOIN facts f ON f.fact_id = o.fact_id WHERE f.stream IN (SELECT value FROM json_each(?)) ORDER BY o.id", decodeOutbox) : []

/** Deletes these streams' facts, timers, snapshots and outbox rows, and forgets their cold history (`coldIds`), in one transaction. */
const deleteStreams = (s: Shard, storage: Storage, ledger: LedgerStorage, streams: ReadonlyArray<string>, coldIds: ReadonlyArray<string>) => {
  const list = JSON.stringify(streams)
  storage.transactionSync(() => {
    s.sql.exec("DELETE FROM outbox WHERE fact_id IN (SELECT fact_id FROM facts WHERE stream IN (SELECT value FROM json_each(?)))", list)
    for (const table of ["facts", "timers", "snapshots"]) s.sql.exec(`DELETE FROM ${table} WHERE stream IN (SELECT value FROM json_each(?))`, list)
    ledger.cold.forget(streams, coldIds)
  })
}

/** Writes a reshard's copied facts and carried rows into a new shard, in one transaction (a row already there is kept, or replaced by the same). */
const importRows = (s: Shard, storage: Storage, input: ReshardImport) => {
  ensureSchema(s)
  const rows = input.facts.map(toRow)
  storage.transactionSync(() => {
    for (const chunk of jsonArrays(rows.map((row) => JSON.stringify([
      row.fact_id, row.tenant_id, row.stream, row.sequence, row.type, row.data,
      row.causation_id, row.correlation_id, row.caused_by, row.created_at, row.traceparent, row.schema_version
    ])))) {
      // A fact already copied (an earlier attempt) is kept as it is: the verification compares what is here.
      s.sql.exec(
        `INSERT OR IGNORE INTO facts (fact_id, tenant_id, stream, sequence, type, data, causation_id, correlation_id, caused_by, created_at, traceparent, schema_version)
         SELECT r.value ->> 0, r.value ->> 1, r.value ->> 2, r.value ->> 3, r.value ->> 4, r.value ->> 5, r.value ->> 6, r.value ->> 7, r.value ->> 8, r.value ->> 9, r.value ->> 10, r.value ->> 11
         FROM json_each(?) AS r`,
        chunk
      )
    }
    for (const row of input.timers ?? []) {
      s.sql.exec(
        "INSERT OR REPLACE INTO timers (timer_id, tenant_id, stream, name, fire_at, status, settled_by) VALUES (?, ?, ?, ?, ?, ?, ?)",
        row["timer_id"] ?? null, row["tenant_id"] ?? null, row["stream"] ?? null, row["name"] ?? null, row["fire_at"] ?? null, row["status"] ?? null, row["settled_by"] ?? null
      )
    }
    for (const row of input.snapshots ?? []) {
      s.sql.exec(
        "INSERT OR REPLACE INTO snapshots (tenant_id, stream, decider, version, fingerprint, sequence, state) VALUES (?, ?, ?, ?, ?, ?, ?)",
        row["tenant_id"] ?? null, row["stream"] ?? null, row["decider"] ?? null, row["version"] ?? null, row["fingerprint"] ?? null, row["sequence"] ?? null, row["state"] ?? null
      )
    }
    for (const row of input.outbox ?? []) {
      s.sql.exec("INSERT INTO outbox (fact_id, destination, created_at) VALUES (?, ?, ?) ON CONFLICT (fact_id, destination) DO NOTHING", row.fact_id, row.destination, row.created_at)
    }
  })
  return rows.length
}

export const make = (storage: Storage, ledger: LedgerStorage): ShardReshard => {
  const s: Shard = { storage, sql: storage.sql, created: false, upToDate: false }
  // Read once per object, then kept in step by every change made here.
  let cached: Place | null | undefined
  const place = (): Place | null => {
    if (cached === undefined) {
      const raw = ledger.getMeta(metaKey)
      cached = raw === undefined ? null : decodePlace(JSON.parse(raw))
    }
    return cached
  }
  const setPlace = (value: Place | null) => {
    ledger.setMeta(metaKey, value === null ? undefined : JSON.stringify(value))
    cached = value
  }

  const refusal = (stream: string): ShardRefusal | undefined => {
    const p = place()
    if (p === null) return undefined
    const h = Shards.hash(stream)
    if (h % p.shards !== p.index) return { status: "moved", shard_count: p.shards }
    if (p.next === undefined || h % p.next.shards === p.index) return undefined
    return p.next.stage === "switched"
      ? { status: "moved", shard_count: p.next.shards }
      : { status: "held", message: `stream ${stream} is being moved to another shard (reshard to ${p.next.shards}); retry` }
  }

  const moving = () => movingStreams(s, place(), ledger.cold.streams)

  const outboxOf = (streams: ReadonlyArray<string>) => outboxRows(s, streams)
  const extrasOf = (streams: ReadonlyArray<string>): ReshardExtras => {
    if (streams.length === 0 || !exists(s)) return { timers: [], snapshots: [], outbox: [] }
    ensureSchema(s)
    return {
      timers: each(s, streams, "SELECT * FROM timers WHERE stream IN (SELECT value FROM json_each(?)) ORDER BY timer_id", decodeRow),
      snapshots: each(s, streams, "SELECT * FROM snapshots WHERE stream IN (SELECT value FROM json_each(?))", decodeRow),
      outbox: outboxRows(s, streams)
    }
  }

  return {
    refusal,
    refusals: (groups) => groups.map((group) => refusal(group.stream)),
    handover: (entries) => {
      const refused = entries.map((entry) => (entry.stream === undefined ? undefined : refusal(entry.stream)))
      // A held stream's facts are still here (its outbox rows are carried at the switch): only a moved one is refused.
      const kept = entries.filter((_, i) => refused[i]?.status !== "moved").map(({ fact_id, destinations }) => ({ fact_id, destinations }))
      const written = ledger.handover(kept)
      const away = refused.find((r) => r?.status === "moved")
      return away?.status === "moved" ? { status: "moved", shard_count: away.shard_count, written } : written
    },
    firingPaused: () => place()?.next !== undefined,
    hold: (index, from, to) => {
      const p = place()
      if (p?.next !== undefined) {
        if (p.next.shards !== to || p.index !== index) throw new Error(`shard ${index} is already in a reshard to ${p.next.shards} shards`)
        return
      }
      if (p !== null && (p.shards !== from || p.index !== index)) throw new Error(`shard ${p.index} of ${p.shards} cannot be resharded as shard ${index} of ${from}`)
      setPlace({ index, shards: from, next: { shards: to, stage: "held" } })
    },
    extras: () => extrasOf(moving()),
    switch: () => {
      const p = place()
      if (p?.next === undefined) throw new Error("this shard is not in a reshard")
      if (p.next.stage !== "switched") setPlace({ ...p, next: { ...p.next, stage: "switched" } })
      return outboxOf(moving())
    },
    drop: async (limit, coldIdsOf) => {
      const p = place()
      if (p?.next === undefined) return { dropped: 0, remaining: 0 }
      if (p.next.stage !== "switched") throw new Error("a held shard's streams are dropped only after the switch")
      const batch = moving().slice(0, Math.max(1, limit))
      if (batch.length > 0) {
        // A switched shard tiers nothing, so the ids read stay its streams' cold facts (ColdForget.forget checks they are).
        const coldIds = await coldIdsOf(batch)
        deleteStreams(s, storage, ledger, batch, coldIds)
      }
      const remaining = moving().length
      // Settled: this shard now owns the streams of its index under the new count.
      if (remaining === 0) setPlace({ index: p.index, shards: p.next.shards })
      return { dropped: batch.length, remaining }
    },
    release: () => {
      const p = place()
      if (p?.next === undefined) return
      if (p.next.stage === "switched") throw new Error("a switched shard cannot be released: its streams are answered by the new shards")
      setPlace({ index: p.index, shards: p.shards })
    },
    import: (input) => {
      const written = importRows(s, storage, input)
      if (place() === null) setPlace({ index: input.index, shards: input.shards })
      if (ledger.getMeta("tenant_id") === undefined) ledger.setMeta("tenant_id", input.tenant_id)
      if (ledger.getMeta("shard_key") === undefined) ledger.setMeta("shard_key", input.shard_key)
      return written
    }
  }
}
