/**
 * Delivery isolation between tenants on the one webhooks queue. A batch waits
 * for its slowest POST (up to the 15 s timeout), and the broker runs a queue's
 * batches one after another per consumer: without a rule, a tenant whose
 * endpoints are slow makes every batch of its flood slow, and every other
 * tenant's deliveries wait behind all of them.
 *
 * The rule: a tenant whose deliveries held a batch for `d` ≥ `slowMs` is held
 * for `d` after it — its deliveries that have never been attempted are put
 * back on the queue (acked and re-sent with a delay, so no retry is spent)
 * instead of being POSTed, and those batches finish in milliseconds. A slow
 * tenant thus gets at most about half of the consumer's time while others
 * have work, and none of its deliveries is dropped or reordered past its own
 * retries (a delivery already attempted is always attempted again: its
 * backoff already spaces it out).
 *
 * Per isolate, in memory: another isolate learns of a slow tenant by its
 * first slow batch. It does not bound how long a single POST may take.
 */

/** A tenant whose slowest attempt in a batch took at least this long is held back. */
export const slowMs = 1_000

export interface TenantHolds {
  /** The time (ms) until which `tenantId` is held, or undefined if it is not. */
  readonly heldUntil: (tenantId: string, nowMs: number) => number | undefined
  /** Records a batch's slowest attempt of `tenantId`. */
  readonly observe: (tenantId: string, slowestMs: number, nowMs: number) => void
}

export const make = (): TenantHolds => {
  const holds = new Map<string, number>()
  return {
    heldUntil: (tenantId, nowMs) => {
      const until = holds.get(tenantId)
      if (until === undefined) return undefined
      if (until > nowMs) return until
      holds.delete(tenantId)
      return undefined
    },
    observe: (tenantId, slowestMs, nowMs) => {
      if (slowestMs >= slowMs) holds.set(tenantId, Math.max(holds.get(tenantId) ?? 0, nowMs + slowestMs))
    }
  }
}
