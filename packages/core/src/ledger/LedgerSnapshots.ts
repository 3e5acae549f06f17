/**
 * Deciders' snapshots in a ledger shard (the `snapshots` table, LedgerRows): written inside an append's
 * transaction, only for a group appended at exactly the snapshot's sequence, and read back with the stream's
 * facts after them in the same call (`read`). A snapshot row is a decider's state as its code encoded it: the
 * shard neither decodes nor trusts it — the caller decodes it with its declared schema and falls back to the
 * full stream when it does not decode. Only rows of the version and fingerprint asked for are answered, so a
 * decider whose snapshot version changed never sees an older one (writing a version drops the older versions'
 * rows of its stream; a newer version's row, written by code deployed later, is left alone).
 */
import * as Schema from "effect/Schema"
import type { Fact } from "@factline/schemas"
import type { AppendGroup, AppendResult, Snapshot, StreamRead, StreamState } from "./LedgerProtocol.js"
import { decodeFactRow, decoder, ensureSchema, type Shard, toFact } from "./LedgerRows.js"

const decodeSnapshot = decoder(Schema.Struct({
  decider: Schema.String,
  version: Schema.Number,
  fingerprint: Schema.String,
  sequence: Schema.Number,
  state: Schema.String
}))
const decodePosition = decoder(Schema.Struct({ sequence: Schema.Number, causation_id: Schema.String, caused_by: Schema.String }))

/** Stores the snapshots of the groups appended at their snapshot's sequence (inside the append's transaction). */
export const writeAppended = (s: Shard, groups: ReadonlyArray<AppendGroup>, results: ReadonlyArray<AppendResult>) => {
  groups.forEach((group, i) => {
    const result = results[i]!
    const snapshot = group.snapshot
    if (snapshot === undefined || result.status !== "appended" || result.version !== snapshot.sequence) return
    s.sql.exec(
      `INSERT INTO snapshots (tenant_id, stream, decider, version, fingerprint, sequence, state) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (tenant_id, stream, decider, version) DO UPDATE SET fingerprint = excluded.fingerprint, sequence = excluded.sequence, state = excluded.state
       WHERE excluded.sequence >= snapshots.sequence OR excluded.fingerprint <> snapshots.fingerprint`,
      group.tenant_id, group.stream, snapshot.decider, snapshot.version, snapshot.fingerprint, snapshot.sequence, snapshot.state
    )
    s.sql.exec("DELETE FROM snapshots WHERE tenant_id = ? AND stream = ? AND decider = ? AND version < ?", group.tenant_id, group.stream, snapshot.decider, snapshot.version)
  })
}

/** The snapshots asked for that are stored (of their version and fingerprint, at or below the stream's version). */
export const found = (s: Shard, key: StreamRead, streamVersion: number): Array<Snapshot> =>
  (key.snapshots ?? []).flatMap((request) =>
    s.sql.exec(
      "SELECT decider, version, fingerprint, sequence, state FROM snapshots WHERE tenant_id = ? AND stream = ? AND decider = ? AND version = ? AND fingerprint = ? AND sequence <= ?",
      key.tenant_id, key.stream, request.decider, request.version, request.fingerprint, streamVersion
    ).toArray().map((row) => decodeSnapshot(row)))

/**
 * The stored decisions opened by the fact ids in `key.decided` that lie at or before `after`: each the run of
 * facts from that fact on with its cause and decider (one decision is one append: contiguous sequences).
 */
export const earlierDecisions = (s: Shard, key: StreamRead, after: number): Array<Fact> => {
  const facts: Array<Fact> = []
  for (const factId of key.decided ?? []) {
    const first = s.sql.exec("SELECT sequence, causation_id, caused_by FROM facts WHERE fact_id = ? AND tenant_id = ? AND stream = ?", factId, key.tenant_id, key.stream).toArray()[0]
    if (first === undefined) continue
    const at = decodePosition(first)
    if (at.sequence > after) continue
    facts.push(...decisionFrom(s, key, at))
  }
  return facts
}

/** Rows read per page of a decision's run: the run ends at the first fact of another cause (no scan to the stream's end). */
const decisionPage = 64

const decisionFrom = (s: Shard, key: StreamRead, at: { readonly sequence: number; readonly causation_id: string; readonly caused_by: string }): Array<Fact> => {
  const facts: Array<Fact> = []
  for (let from = at.sequence; ; from += decisionPage) {
    const rows = s.sql.exec("SELECT * FROM facts WHERE tenant_id = ? AND stream = ? AND sequence >= ? ORDER BY sequence LIMIT ?", key.tenant_id, key.stream, from, decisionPage).toArray()
    for (const raw of rows) {
      const row = decodeFactRow(raw)
      if (row.causation_id !== at.causation_id || row.caused_by !== at.caused_by) return facts
      facts.push(toFact(row))
    }
    if (rows.length < decisionPage) return facts
  }
}

/**
 * What a read asking for snapshots answers besides the facts: the snapshots found, the sequence the facts start
 * after (the oldest snapshot's; `after` when one is missing) and the earlier decisions. Undefined: none asked for.
 */
export const readWith = (s: Shard, key: StreamRead, streamVersion: number, after: number): Pick<StreamState, "after" | "snapshots" | "earlier"> | undefined => {
  if (key.snapshots === undefined || key.snapshots.length === 0) return undefined
  // A shard written before snapshots gets their table here (its facts table exists: no storage is created).
  ensureSchema(s)
  const snapshots = found(s, key, streamVersion)
  const from = snapshots.length === key.snapshots.length ? Math.max(after, Math.min(...snapshots.map((x) => x.sequence))) : after
  return { after: from, snapshots, earlier: earlierDecisions(s, key, from) }
}
