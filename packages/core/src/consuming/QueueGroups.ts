/**
 * Queue groups: the physical queues behind a grouped purpose, so that one
 * tenant's flood queues up behind itself, not behind every tenant.
 *
 * A grouped purpose (`factline-events`, `factline-projections`,
 * `factline-fact-processing`: where a flood piles up) runs as G queues named
 * `factline-{purpose}-{group}` (seed 001's naming), each with its own
 * consumer: the broker runs one batch per queue at a time, so G queues drain
 * concurrently. A tenant's group is a stable hash of its tenant id modulo G,
 * chosen by whoever sends (the producer, the relay, a shard's outbox), so every
 * hop of a tenant's work stays in its group. Group 0 keeps the purpose's
 * unsuffixed binding (`EVENTS_QUEUE`); group g > 0 is bound as `EVENTS_QUEUE_g`.
 *
 * The logical name (`factline-events`) stays the identity everywhere else:
 * registry destinations, shard outboxes, metrics, dead-letter records (a replay
 * routes a record to its tenant's group afresh) and log lines.
 * One dead-letter queue per purpose is kept: dead letters are rare, and their
 * consumer only stores them. It does not send anything, and it does not move a
 * tenant: changing G re-hashes tenants (in-flight messages still drain from the
 * queues they are on).
 */
import * as RetryPolicy from "./RetryPolicy.js"

/** Default G: four groups. */
export const defaultGroups = 4
/** Bounds for `FACTLINE_QUEUE_GROUPS` (each group is 3 queues and 3 consumers in wrangler config). */
export const maxGroups = 32

/** A stable, well-spread 32-bit hash (FNV-1a) of a tenant id: the same group in every isolate and deploy. */
const hash = (s: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

/** The group of a tenant among `groups` (0 … groups − 1). */
export const groupOf = (tenantId: string, groups: number): number => groups <= 1 ? 0 : hash(tenantId) % groups

/** The queue of `policy`'s group `group`. */
export const queueName = (policy: RetryPolicy.RetryPolicy, group: number): string => `${policy.queue}-${group}`

/** The producer binding of `policy`'s group `group` (group 0 keeps the purpose's own binding). */
export const bindingName = (policy: RetryPolicy.RetryPolicy, group: number): string => group === 0 ? policy.binding : `${policy.binding}_${group}`

/** Every queue of a grouped policy (its purpose's queue alone when not grouped). */
export const queuesOf = (policy: RetryPolicy.RetryPolicy, groups: number): ReadonlyArray<string> =>
  policy.grouped ? Array.from({ length: Math.max(1, groups) }, (_, g) => queueName(policy, g)) : [policy.queue]

/**
 * Where a message for `tenantId` goes: a grouped purpose's logical name becomes the tenant's group queue;
 * any other name (ungrouped, a DLQ, or already a group queue) is returned as it is.
 */
export const route = (queue: string, tenantId: string, groups: number): string => {
  const policy = RetryPolicy.all.find((p) => p.queue === queue)
  return policy?.grouped === true ? queueName(policy, groupOf(tenantId, groups)) : queue
}

/** A queue name read back: its policy, and its group for a group queue (undefined for a purpose's own name or a DLQ). */
export const parse = (queue: string): { readonly policy: RetryPolicy.RetryPolicy; readonly group: number | undefined } | undefined => {
  for (const policy of RetryPolicy.all) {
    if (policy.queue === queue || policy.deadLetterQueue === queue) return { policy, group: undefined }
    if (policy.grouped && queue.startsWith(`${policy.queue}-`)) {
      const rest = queue.slice(policy.queue.length + 1)
      if (/^(0|[1-9][0-9]*)$/.test(rest)) return { policy, group: Number(rest) }
    }
  }
  return undefined
}

/** The logical name of a queue: `factline-events-3` → `factline-events`; other names unchanged. */
export const purposeOf = (queue: string): string => {
  const parsed = parse(queue)
  return parsed?.group === undefined ? queue : parsed.policy.queue
}

/** The producer binding name of a queue by name (a group queue, a purpose's queue as group 0, or a DLQ); undefined when unknown. */
export const bindingOf = (queue: string): string | undefined => {
  const parsed = parse(queue)
  if (parsed === undefined) return undefined
  if (parsed.policy.deadLetterQueue === queue) return parsed.policy.deadLetterBinding
  return bindingName(parsed.policy, parsed.group ?? 0)
}
