/**
 * Retry policies: the queue table (docs/queues.md) as data, in one place.
 *
 * Everything that depends on a queue's retry/batch behaviour reads it from
 * here: the consumer runtime (retry delays, last attempt), the wrangler config
 * check (consumer settings must match), and the docs. It does not send or
 * retry anything itself.
 */

/** Cloudflare Queues refuses `delaySeconds` above 12 hours (the conservative cap across APIs). */
export const maxDelaySeconds = 12 * 60 * 60

/**
 * Message retention (seed 001's queue table): a primary queue keeps an unconsumed message 4 days (Cloudflare's
 * default), a dead-letter queue 14 days (the most Queues allows on a paid plan) so that a dead letter its
 * consumer could not store outlives a long outage. `factline deploy` creates every queue with its retention
 * (`--message-retention-period-secs`); health grades each queue's backlog age against it.
 */
export const defaultRetentionSeconds = 4 * 24 * 60 * 60
export const deadLetterRetentionSeconds = 14 * 24 * 60 * 60

export interface RetryPolicy {
  readonly queue: string
  readonly deadLetterQueue: string
  /** Binding names in wrangler config: the producer for the queue and for its DLQ. */
  readonly binding: string
  readonly deadLetterBinding: string
  readonly maxRetries: number
  readonly initialDelaySeconds: number
  readonly maxDelaySeconds: number
  readonly maxBatchSize: number
  readonly maxBatchTimeoutSeconds: number
  /** Run as one queue per tenant group (`factline-{purpose}-{group}`, see QueueGroups) rather than one queue. */
  readonly grouped: boolean
  /** How long the queue (each group queue) keeps an unconsumed message, and its DLQ (seconds; see `defaultRetentionSeconds`). */
  readonly messageRetentionSeconds: number
  readonly deadLetterRetentionSeconds: number
}

const policy = (
  name: string,
  binding: string,
  maxRetries: number,
  initialDelaySeconds: number,
  maxDelay: number,
  maxBatchSize: number,
  maxBatchTimeoutSeconds: number,
  grouped = false
): RetryPolicy => ({
  queue: `factline-${name}`,
  deadLetterQueue: `factline-${name}-dlq`,
  binding: `${binding}_QUEUE`,
  deadLetterBinding: `${binding}_DLQ`,
  maxRetries,
  initialDelaySeconds,
  maxDelaySeconds: maxDelay,
  maxBatchSize,
  maxBatchTimeoutSeconds,
  grouped,
  messageRetentionSeconds: defaultRetentionSeconds,
  deadLetterRetentionSeconds
})

// Batch settings: the local broker (and a production consumer that is not scaled out) runs one batch
// per queue at a time, so throughput = batch size ÷ batch latency, and every per-batch cost (one RPC
// per shard, one send per destination, one projection statement) is shared by up to 100 messages.
// A fact message carries a whole upstream batch's facts, so 100 fact messages can hold thousands of facts —
// and a fact queue receives about one message per upstream batch and destination: its batches rarely fill,
// and each fact hop waits out its max_batch_timeout. Hence 0.5 s on the two fact queues (issue 22: freshness
// p99 at 1,000 events/s over four groups, production profile, 3.96 s at 1 s → 2.31 s at 0.5 s). The cost is at
// most twice the fact-queue invocations under sustained load; wrangler sends it as max_wait_time_ms (500).
// The three queues a tenant's flood piles up in are grouped per tenant group (QueueGroups); webhooks are
// paced per endpoint already and batch jobs are few, so they stay one queue each.
export const events = policy("events", "EVENTS", 5, 30, 8 * 60, 100, 1, true)
export const projections = policy("projections", "PROJECTIONS", 10, 1, 60, 100, 0.5, true)
export const factProcessing = policy("fact-processing", "FACT_PROCESSING", 5, 5, 2 * 60, 100, 0.5, true)
export const webhooks = policy("webhooks", "WEBHOOKS", 5, 10, 5 * 60, 10, 5)
export const batch = policy("batch", "BATCH", 3, 30, 5 * 60, 10, 10)

/**
 * The queue table by purpose. A table that needs something per queue is keyed by `Purpose` (the Worker's consumer
 * programs in @factline/workers' Platform.ts, the messages each channel carries in AsyncApi.ts), so a queue added
 * here fails to typecheck until each of them says what it does with it; everything else reads `all`.
 */
export const byPurpose = { events, projections, factProcessing, webhooks, batch } as const
export type Purpose = keyof typeof byPurpose
/** Every purpose, in the table's order (the keys of `byPurpose`, which are exactly `Purpose`). */
export const purposes = Object.keys(byPurpose) as ReadonlyArray<Purpose>

export const all: ReadonlyArray<RetryPolicy> = purposes.map((purpose) => byPurpose[purpose])

/**
 * The consumer of every `*-dlq` queue (DeadLetterConsumer): its batch settings, and `max_retries` — it has no
 * dead-letter queue of its own, so a message it retries past its last delivery would be gone. From
 * `spillFromAttempt` on (about 28 minutes of failed deliveries at `min(60·n, 600)` s apart), a dead letter it
 * cannot store in D1 is spilled to R2 instead (DeadLetterSpill), leaving `maxRetries + 1 − spillFromAttempt`
 * deliveries for R2 to take it.
 */
export const deadLetterConsumer = { maxBatchSize: 100, maxBatchTimeoutSeconds: 5, maxRetries: 10, spillFromAttempt: 8 } as const

/** The queues a fact is relayed to (those that listen to its type decide what to do with it). */
export const factQueues: ReadonlyArray<string> = [projections.queue, factProcessing.queue, webhooks.queue]

/** The policy of a queue by name (a grouped purpose's group queue `factline-events-3` too), or of the queue a DLQ belongs to. */
export const forQueue = (queue: string): RetryPolicy | undefined =>
  all.find((p) => p.queue === queue || p.deadLetterQueue === queue || (p.grouped && new RegExp(`^${p.queue}-(0|[1-9][0-9]*)$`).test(queue)))

export const isDeadLetterQueue = (queue: string): boolean => all.some((p) => p.deadLetterQueue === queue)

/**
 * Delay before the next delivery after `attempts` failed deliveries (1-based):
 * `min(initial · 2^(attempts−1), max)`, never above the platform cap. With
 * `jitter` (a number in [0, 1)), the delay is spread over [delay/2, delay] ("equal jitter") so that a
 * burst of failures does not come back as a burst, while the floor still doubles with each attempt: a
 * dependency that is down is never asked again sooner than half the designed delay. The consumer runtime
 * passes `jitterOf(message id, attempts)`.
 */
export const delay = (p: RetryPolicy, attempts: number, jitter?: number): number => {
  const n = Math.max(1, Math.floor(attempts))
  const exponential = p.initialDelaySeconds * Math.pow(2, Math.min(n - 1, 62))
  const capped = Math.min(exponential, p.maxDelaySeconds, maxDelaySeconds)
  if (jitter === undefined) return Math.ceil(capped)
  return Math.ceil(capped / 2 + (capped / 2) * Math.min(Math.max(jitter, 0), 0.999999))
}

/**
 * The jitter of one message's retry: a number in [0, 1) hashed (FNV-1a, 32 bits) from its queue message id
 * and attempt. Messages of one burst have distinct ids, so their retries spread over the delay's upper half;
 * one message at one attempt always gets the same delay, so a test (or an operator reading the log) can
 * tell which delay a retry was given without seeding a random generator.
 */
export const jitterOf = (messageId: string, attempts: number): number => {
  const text = `${messageId}#${attempts}`
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  // Murmur3's finaliser: FNV-1a alone leaves ids that differ only in their last characters close together.
  hash ^= hash >>> 16
  hash = Math.imul(hash, 0x85ebca6b)
  hash ^= hash >>> 13
  hash = Math.imul(hash, 0xc2b2ae35)
  hash ^= hash >>> 16
  return (hash >>> 0) / 0x1_0000_0000
}

/**
 * Whether delivery number `attempts` (1-based, as `Message.attempts`) is the
 * last one the queue allows: `max_retries` retries after the first delivery.
 */
export const isLastAttempt = (p: RetryPolicy, attempts: number): boolean => attempts >= p.maxRetries + 1
