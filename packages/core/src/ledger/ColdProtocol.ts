/**
 * A ledger shard's calls for its cold history (ColdHistory.ts): the scheduled sweep's `tier` (ColdTiering.ts) and
 * the operators' `coldStats`. Plain, structured-clone-safe data, as the rest of the shard protocol.
 */

/** What one `tier` call did. */
export interface Tiered {
  /** Facts moved to R2 (0: none were due, or the shard changed while the segment was written). */
  readonly tiered: number
  /** The walk reached the shard's last stream: a caller may stop calling it until the next run. */
  readonly wrapped: boolean
  /** The segment's object key, when one was recorded. */
  readonly segment?: string
  /** Another tier call of this object was running: nothing was done. */
  readonly busy?: boolean
}

/** What a shard's cold manifest says. */
export interface ColdStats {
  readonly segments: number
  readonly facts: number
  readonly bytes: number
  /** The oldest and newest `created_at` of a cold fact (null: none is cold). */
  readonly oldest: string | null
  readonly newest: string | null
}

export interface ColdRpc {
  /**
   * Moves one chunk of this shard's facts created before `cutoff` (ISO-8601), at most `limit`, to a cold segment in
   * R2 (ColdHistory.ts): written, read back, verified, then recorded and deleted from SQLite in one transaction.
   * `shardKey` names the segment's place (`<tenant>/ledger/<n>/`).
   */
  tier(shardKey: string, cutoff: string, limit: number): Promise<Tiered>
  /** The shard's cold manifest totals (segments, facts, bytes, oldest and newest cold fact). */
  coldStats(): Promise<ColdStats>
}
