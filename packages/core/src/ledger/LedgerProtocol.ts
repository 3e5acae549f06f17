/**
 * The ledger's RPC contract: what the events and fact-processing consumers send a LedgerShard and what it gets back.
 *
 * Plain, structured-clone-safe data (it crosses a Durable Object RPC boundary).
 * One `append` call carries every group of a batch that lands on one shard
 * (a shard holds many streams), written in one transaction; each group is
 * judged on its own, in turn, so one conflict does not undo its neighbours. Appending writes facts only:
 * the caller relays them. `handover` gives the shard the facts a caller could
 * not send, to relay from its outbox with its alarm.
 */
import type { KeyStoreRpc } from "../personal/KeyStorage.js"
import type { ColdRpc } from "./ColdProtocol.js"
import type { Fact } from "@factline/schemas"

/** A fact ready to append: its id is already fixed by its cause; the ledger assigns the sequence. */
export interface FactDraft {
  readonly fact_id: string
  readonly type: string
  readonly data: Record<string, unknown>
  /** The version of its type's schema `data` is written at (absent: 1). */
  readonly schema_version?: number
  readonly causation_id: string
  readonly correlation_id: string
  readonly caused_by: string
  readonly created_at: string
  /** W3C trace context of the step that decided it (stored as given; not part of the fact's identity). */
  readonly traceparent?: string
}

export interface StreamKey {
  readonly tenant_id: string
  readonly stream: string
}

export interface AppendGroup extends StreamKey {
  /** Optimistic concurrency: append only if the stream is exactly at this version. */
  readonly expected_version?: number
  readonly facts: ReadonlyArray<FactDraft>
  /**
   * A decider's state after these facts (its `sequence` the version the append reaches): stored in the same
   * transaction only when the group is appended at exactly that version — never from a state that was not.
   */
  readonly snapshot?: Snapshot
}

/** A decider's folded state as its shard stores it: the state (JSON of its declared schema) after `sequence`. */
export interface Snapshot {
  readonly decider: string
  readonly version: number
  /** What else must match for it to be used (Handler.Snapshot.fingerprint). */
  readonly fingerprint: string
  readonly sequence: number
  readonly state: string
}

/** The snapshot a read asks for: a decider's, of this version and fingerprint only. */
export type SnapshotRequest = Pick<Snapshot, "decider" | "version" | "fingerprint">

/**
 * A stream read by deciders that snapshot: the shard answers each decider's latest snapshot with the facts after
 * the oldest of them (all facts when one has none), and the stored decisions whose first fact id is in `decided`
 * that lie before those facts (a redelivered message's decision is found whatever the snapshot covers).
 */
export interface StreamRead extends StreamKey {
  readonly snapshots?: ReadonlyArray<SnapshotRequest>
  readonly decided?: ReadonlyArray<string>
}

export type AppendResult =
  /** Facts were written in one transaction (no outbox rows: the caller relays them; see `handover`). */
  | { readonly status: "appended"; readonly version: number; readonly facts: ReadonlyArray<Fact> }
  /** Every fact already existed with the same body: nothing written, the stored facts returned. */
  | { readonly status: "duplicate"; readonly version: number; readonly facts: ReadonlyArray<Fact> }
  | { readonly status: "version_conflict"; readonly version: number; readonly expected_version: number }
  /** A fact id exists with a different body: the same cause decided something else. Permanent. */
  | { readonly status: "idempotency_conflict"; readonly fact_id: string; readonly message: string }

/**
 * A shard's answer per group over RPC: an appended group's facts are its drafts as sent, numbered up to `version`
 * (`appendedFacts`), so they do not travel back; the ledger client completes the answer (`toResult`).
 */
export type AppendAnswer =
  | Exclude<AppendResult, { readonly status: "appended" }>
  | { readonly status: "appended"; readonly version: number }
  | ShardRefusal

/**
 * A shard's refusal of a stream that a reshard moves (ShardReshard.ts), never seen past the ledger client: `held`
 * while the stream is being copied (retryable: the client answers `unavailable`), `moved` once its shard has
 * switched — the stream lives in the tenant's shard under `shard_count` now; the client refreshes its topology
 * and asks there at once.
 */
export type ShardRefusal =
  | { readonly status: "held"; readonly message: string }
  | { readonly status: "moved"; readonly shard_count: number }

/** The facts an append of `group` stored, its stream now at `version`: the drafts, numbered, at their schema version. */
export const appendedFacts = (group: AppendGroup, version: number): Array<Fact> =>
  group.facts.map((draft, i) => ({
    ...draft,
    schema_version: draft.schema_version ?? 1,
    tenant_id: group.tenant_id,
    stream: group.stream,
    sequence: version - group.facts.length + i + 1
  }))

/** What the shard sends back for a result. */
export const toAnswer = (result: AppendResult): AppendAnswer =>
  result.status === "appended" ? { status: "appended", version: result.version } : result

/** A shard's answer for `group` completed with its facts. */
export const toResult = (group: AppendGroup, answer: Exclude<AppendAnswer, ShardRefusal>): AppendResult =>
  answer.status === "appended" ? { status: "appended", version: answer.version, facts: appendedFacts(group, answer.version) } : answer

export interface StreamState extends StreamKey {
  readonly version: number
  /** The facts after `after` (absent: 0, every fact). */
  readonly facts: ReadonlyArray<Fact>
  /** Set when a read that asked for snapshots found some: `facts` start after this sequence. */
  readonly after?: number
  readonly snapshots?: ReadonlyArray<Snapshot>
  /** The stored facts of the `decided` decisions at or before `after`. */
  readonly earlier?: ReadonlyArray<Fact>
  /** Set by a shard the stream has left in a reshard: it lives in the tenant's shard under this count (nothing else is answered). */
  readonly moved?: number
}

export interface ReadOptions {
  readonly after?: number
  readonly limit?: number
}

/** Stored facts a caller could not send: the shard relays them from its outbox. */
export interface Handover {
  readonly fact_id: string
  readonly destinations: ReadonlyArray<string>
  /** The fact's stream (the ledger client sets it): a shard the stream has moved from refuses the entry. */
  readonly stream?: string
}

/** A shard's answer to a handover: the rows written, or (a reshard moved some entries' streams) those and where they went. */
export type HandoverAnswer = number | { readonly status: "moved"; readonly shard_count: number; readonly written: number }

/** What a reshard carries from an old shard to the new ones besides facts (ShardReshard.ts): rows as the shard stores them. */
export interface ReshardExtras {
  readonly timers: ReadonlyArray<Record<string, string | number | null>>
  readonly snapshots: ReadonlyArray<Record<string, string | number | null>>
  readonly outbox: ReadonlyArray<{ readonly fact_id: string; readonly stream: string; readonly destination: string; readonly created_at: string }>
}

/** What a new shard is given in a reshard: its place (`index` of `shards`), and facts and rows copied with their ids and sequences. */
export interface ReshardImport extends Partial<ReshardExtras> {
  readonly tenant_id: string
  readonly shard_key: string
  readonly index: number
  readonly shards: number
  readonly facts: ReadonlyArray<Fact>
}

/** A shard's calls for a reshard (placement/Reshard.ts drives them; ShardReshard.ts answers them). */
export interface ReshardRpc {
  /** Holds this old shard's moving streams (appends answered `held`) for a reshard from `from` to `to` shards; `index` is its number. */
  reshardHold(index: number, from: number, to: number): Promise<void>
  /** The timers, snapshots and outbox rows of the held moving streams. */
  reshardExtras(): Promise<ReshardExtras>
  /** Switches: moving streams are answered `moved` from now on; returns their outbox rows at that moment. */
  reshardSwitch(): Promise<ReshardExtras["outbox"]>
  /** Deletes up to `streams` moved streams' facts and rows; how many it deleted and how many remain (0: done, the shard settles on the new count). */
  reshardDrop(streams: number): Promise<{ readonly dropped: number; readonly remaining: number }>
  /** Lifts a hold that has not switched (a reshard that failed). */
  reshardRelease(): Promise<void>
  /** Writes copied facts and rows (idempotent: a row already there is kept) and arms the alarm for carried outbox rows and timers. */
  reshardImport(input: ReshardImport): Promise<number>
}

/** The RPC surface of the LedgerShard Durable Object. */
/** A shard's calls; the same class also answers the key store's (an object named `KeyStorage.objectName(tenant)`). */
export interface LedgerShardRpc extends KeyStoreRpc, ReshardRpc, ColdRpc {
  /** A result per group, in order; an appended group's facts are left for the caller to number (`toResult`). */
  append(groups: ReadonlyArray<AppendGroup>): Promise<ReadonlyArray<AppendAnswer>>
  /** Writes outbox rows for these stored facts and arms the relay alarm; returns how many rows were written. */
  handover(entries: ReadonlyArray<Handover>, shardKey: string): Promise<HandoverAnswer>
  readStreams(keys: ReadonlyArray<StreamRead>): Promise<ReadonlyArray<StreamState>>
  read(key: StreamKey, options?: ReadOptions): Promise<StreamState>
  readShard(after: ShardCursor | undefined, limit: number): Promise<ReadonlyArray<Fact>>
  /** The facts appended since `since` among the next `scan` facts after `after`, and where to go on (Recovery). */
  readShardSince(after: ShardCursor | undefined, since: string, scan: number): Promise<{ readonly facts: ReadonlyArray<Fact>; readonly next: ShardCursor | undefined }>
  /** The fact with this id if this shard holds it (an indexed lookup), else null. */
  findFact(factId: string): Promise<Fact | null>
  /** Re-arms the relay if outbox rows are waiting (the scheduled sweep); returns how many wait. */
  relayNow(shardKey?: string): Promise<number>
  /** Deletes all of the object's storage and its alarm (a tenant's deletion): it answers as a new, empty object afterwards. */
  deleteAll(): Promise<void>
}

/** Position in a shard's facts, ordered by (stream, sequence). */
export interface ShardCursor {
  readonly stream: string
  readonly sequence: number
}
