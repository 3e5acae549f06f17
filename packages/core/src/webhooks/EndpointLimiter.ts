/**
 * One webhook endpoint's delivery limits, as its Durable Object keeps them (`EndpointLimiter` in
 * `@factline/workers`, one object per endpoint, so every isolate and every concurrent consumer invocation asks
 * the same one): at most `maxPerSecond` POSTs started in any window of one second (a sliding log of grant
 * times, not a token bucket — a bucket lets a full burst follow a full second), and at most `maxInFlight`
 * POSTs between their grant and their release. Each grant is a lease on the delivery id that expires after
 * `leaseMs` (longer than a POST's 15 s timeout), so an invocation that dies mid-POST does not hold its slot
 * for ever; asking again for a delivery id already holding a lease (its redelivery) replaces that lease.
 *
 * Pure: state in, state out, the time given — the object persists the state and supplies its clock. It does
 * not send, delay or record anything: the consumer does that with what `acquire` answers.
 */

/** An endpoint's limits (null: none of that kind). */
export interface Limits {
  readonly maxPerSecond: number | null
  readonly maxInFlight: number | null
}

export interface State {
  /** Grant times (ms) within the last window, oldest first. */
  readonly grants: Array<number>
  /** Delivery id → when its lease expires (ms). */
  readonly leases: Record<string, number>
}

export interface Grant {
  /** The delivery ids granted, in the order asked. */
  readonly granted: ReadonlyArray<string>
  /** For each id not granted (in the order asked): how long to wait before asking again, in ms. */
  readonly waits: ReadonlyArray<{ readonly id: string; readonly ms: number }>
}

/** The protocol of the endpoint's Durable Object (its stub answers it). */
export interface EndpointLimiterRpc {
  acquire(limits: Limits, ids: ReadonlyArray<string>): Promise<Grant>
  release(ids: ReadonlyArray<string>): Promise<void>
}

/** The part of a `DurableObjectNamespace` the limits use, with stubs typed by the protocol. */
export interface EndpointLimiterNamespace {
  idFromName(name: string): DurableObjectId
  get(id: DurableObjectId): EndpointLimiterRpc
}

export const windowMs = 1_000
/** A lease outlives a POST (15 s timeout) with room for signing and recording; then its slot comes back. */
export const leaseMs = 30_000
/** Whatever holds a slot, nobody asks again sooner than this (queue delays are whole seconds). */
export const minWaitMs = 1_000

export const empty = (): State => ({ grants: [], leases: {} })

const prune = (state: State, now: number): State => {
  const grants = state.grants.filter((t) => t > now - windowMs)
  const leases: Record<string, number> = {}
  for (const [id, expires] of Object.entries(state.leases)) if (expires > now) leases[id] = expires
  return { grants, leases }
}

/**
 * Grants what the limits allow now, in the order asked; the rest wait. The waits are spread — the k-th
 * delivery not granted waits about k / rate seconds more — so a backlog comes back at the endpoint's pace
 * instead of all at once.
 */
export const acquire = (before: State, limits: Limits, ids: ReadonlyArray<string>, now: number): { readonly state: State; readonly grant: Grant } => {
  const state = prune(before, now)
  const grants = [...state.grants]
  const leases = { ...state.leases }
  const granted: Array<string> = []
  const refused: Array<string> = []
  for (const id of ids) {
    const inFlight = Object.keys(leases).length - (id in leases ? 1 : 0)
    const rateOk = limits.maxPerSecond === null || grants.length < limits.maxPerSecond
    const slotOk = limits.maxInFlight === null || inFlight < limits.maxInFlight
    if (refused.length === 0 && rateOk && slotOk) {
      grants.push(now)
      leases[id] = now + leaseMs
      granted.push(id)
    } else refused.push(id)
  }
  // The first wait: until the oldest grant leaves the window (rate), or at least the minimum (a slot frees
  // when a POST ends: unknown here).
  const untilWindow = limits.maxPerSecond !== null && grants.length >= limits.maxPerSecond ? grants[grants.length - limits.maxPerSecond]! + windowMs - now : 0
  const first = Math.max(minWaitMs, untilWindow)
  const pace = Math.max(1, Math.min(limits.maxPerSecond ?? Infinity, limits.maxInFlight ?? Infinity))
  const waits = refused.map((id, k) => ({ id, ms: first + Math.floor(k / pace) * 1_000 }))
  return { state: { grants, leases }, grant: { granted, waits } }
}

/** Ends the leases of these delivery ids (their POSTs are over). */
export const release = (before: State, ids: ReadonlyArray<string>, now: number): State => {
  const state = prune(before, now)
  const leases = { ...state.leases }
  for (const id of ids) delete leases[id]
  return { grants: state.grants, leases }
}

/** Whether the endpoint limits anything (an endpoint without limits never calls its object). */
export const limits = (endpoint: { readonly max_per_second: number | null; readonly max_in_flight: number | null }): Limits | undefined =>
  endpoint.max_per_second === null && endpoint.max_in_flight === null ? undefined : { maxPerSecond: endpoint.max_per_second, maxInFlight: endpoint.max_in_flight }
