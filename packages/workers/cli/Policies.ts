/**
 * The platform's queues, bindings and consumer settings as plain data, for the CLI (init writes them into
 * wrangler.jsonc, deploy checks a config against them and creates every queue). The queues, their consumer
 * settings and retention, the dead-letter consumer and the queue groups are derived from `@factline/core`'s
 * RetryPolicy and QueueGroups (the one queue table, docs/architecture.md "Where each kind of change goes"):
 * a queue added there is written by init, checked and created by deploy without an edit here.
 */
// The two modules of the table by their paths, not through `@factline/core/runtime`: they import nothing else, so the
// command loads them in a fraction of a second and `npm run factline` runs them from sources in Node's strip-only
// TypeScript (the whole runtime entry takes seconds to load, and some of core's sources use syntax Node cannot strip).
import * as QueueGroups from "@factline/core/internal/consuming/QueueGroups"
import * as RetryPolicy from "@factline/core/internal/consuming/RetryPolicy"

/** A platform queue: its producer binding, its dead-letter queue and the consumer settings. */
export interface Queue {
  readonly queue: string
  /** Run as one queue per tenant group (`<queue>-<g>`). */
  readonly grouped?: boolean
  readonly binding: string
  readonly deadLetterQueue: string
  readonly deadLetterBinding: string
  readonly maxRetries: number
  readonly maxBatchSize: number
  readonly maxBatchTimeoutSeconds: number
  readonly messageRetentionSeconds: number
  readonly deadLetterRetentionSeconds: number
}

/** One entry per platform queue (RetryPolicy.all, in its order): its producer binding, its dead-letter queue and the consumer settings. */
export const queues: ReadonlyArray<Queue> = RetryPolicy.all.map((p) => ({
  queue: p.queue,
  ...(p.grouped ? { grouped: true } : {}),
  binding: p.binding,
  deadLetterQueue: p.deadLetterQueue,
  deadLetterBinding: p.deadLetterBinding,
  maxRetries: p.maxRetries,
  maxBatchSize: p.maxBatchSize,
  maxBatchTimeoutSeconds: p.maxBatchTimeoutSeconds,
  messageRetentionSeconds: p.messageRetentionSeconds,
  deadLetterRetentionSeconds: p.deadLetterRetentionSeconds
}))

/**
 * How long a queue keeps an unconsumed message (seconds): each entry's `messageRetentionSeconds` for its queue
 * and group queues (4 days), `deadLetterRetentionSeconds` for its DLQ (14 days, the most Queues allows; seed
 * 001). Deploy creates each queue with it (`--message-retention-period-secs`); undefined for a queue not ours.
 */
export const retentionOf = (name: string): number | undefined => {
  const policy = RetryPolicy.forQueue(name)
  if (policy === undefined) return undefined
  return name === policy.deadLetterQueue ? policy.deadLetterRetentionSeconds : policy.messageRetentionSeconds
}

/** A retention in words: "14 days", "36 hours". */
export const retentionText = (seconds: number): string => seconds % 86_400 === 0 ? `${seconds / 86_400} days` : `${Math.round(seconds / 3_600)} hours`

/**
 * Tenant groups of the grouped queues (`FACTLINE_QUEUE_GROUPS` in an environment's vars; default 4): each
 * grouped queue runs as `<queue>-<g>` for g in 0…G−1, bound as `<BINDING>` (g = 0) and `<BINDING>_<g>`, each
 * with its own consumer, all sharing the purpose's one DLQ (core's QueueGroups).
 */
export const defaultQueueGroups = QueueGroups.defaultGroups
/** The most groups the Worker accepts (core's QueueGroups.maxGroups). */
export const maxQueueGroups = QueueGroups.maxGroups

/** The groups an effective config asks for: its `vars.FACTLINE_QUEUE_GROUPS`, or the default. */
export const queueGroupsOf = (effective: { readonly vars?: Record<string, unknown> } | undefined): number => {
  const raw = effective?.vars?.FACTLINE_QUEUE_GROUPS
  const n = raw === undefined || raw === "" ? defaultQueueGroups : Number(raw)
  return Number.isInteger(n) && n >= 1 && n <= maxQueueGroups ? n : defaultQueueGroups
}

/** The physical queues of one entry of `queues`: one per group for a grouped queue, else the queue itself (QueueGroups' names). */
export const physicalQueues = (q: Queue, groups: number = defaultQueueGroups): Array<{ readonly queue: string; readonly binding: string }> => {
  const policy = RetryPolicy.all.find((p) => p.queue === q.queue)
  return q.grouped && policy !== undefined
    ? Array.from({ length: groups }, (_, g) => ({ queue: QueueGroups.queueName(policy, g), binding: QueueGroups.bindingName(policy, g) }))
    : [{ queue: q.queue, binding: q.binding }]
}

/**
 * Each DLQ is consumed too: its messages are stored in D1 `dead_messages` for the operators. Its `max_retries`
 * is part of the policy: from delivery `spillFromAttempt` on, a dead letter D1 refuses is spilled to R2, which
 * needs deliveries left after it (core's `RetryPolicy.deadLetterConsumer`, read from there).
 */
export const deadLetterConsumer: { readonly maxBatchSize: number; readonly maxBatchTimeoutSeconds: number; readonly maxRetries: number; readonly spillFromAttempt: number } =
  RetryPolicy.deadLetterConsumer

/** Every other binding the platform's Worker reads (see PlatformEnv in @factline/workers). */
export const bindings = {
  database: "DB",
  /** Read database n is bound as `FACTLINE_READ_DB_<n>`, numbered from 0 without gaps (0 may be DB itself). */
  readDatabasePrefix: "FACTLINE_READ_DB_",
  /** The most read databases the Worker reads (`FACTLINE_READ_DB_0` … `_63`, Services.ts). */
  maxReadDatabases: 64,
  payloads: "PAYLOADS",
  ledger: { binding: "LEDGER", className: "LedgerShard" },
  /** One object per webhook endpoint with limits (max_per_second, max_in_flight): the limits across isolates. */
  limiter: { binding: "WEBHOOK_LIMITER", className: "EndpointLimiter" },
  /** Cloudflare Workflows: one workflow of class FactlineWorkflow runs every module's workflows (when the app has any). */
  workflows: { binding: "FACTLINE_WORKFLOWS", className: "FactlineWorkflow" },
  /** The cron that sweeps stale relays and prunes retained rows. */
  crons: ["*/5 * * * *"]
}

/** The Durable Object classes' migrations, in order (a class added later gets a tag of its own: deployed apps apply only the new one). */
export const durableObjectMigrations = [
  { tag: "v1", new_sqlite_classes: [bindings.ledger.className] },
  { tag: "v2", new_sqlite_classes: [bindings.limiter.className] }
]

/** Secrets a deployed platform refuses to run without (every request is refused / endpoints cannot be created). */
export const requiredSecrets = ["FACTLINE_TOKENS", "FACTLINE_SECRETS_KEY"]

/** Settings that must never reach a deployed environment. */
export const localOnlyVars = ["FACTLINE_LOCAL_DEVELOPMENT"]

/**
 * Large payloads in R2 (core's PayloadStore): every offloaded payload is under `prefix`, apart from the
 * tenants' uploads, batch files and facts archive, so that one lifecycle rule (`rule`, set by deploy)
 * expires them after `retentionDays` (`--payload-retention-days`, or `vars.FACTLINE_PAYLOAD_RETENTION_DAYS`).
 */
// `prefix` is PayloadStore.payloadsPrefix (a module that loads effect, so not imported here; Policies.test.mjs holds them equal).
export const payloads = { prefix: "_payloads/", rule: "factline-payload-expiry", defaultRetentionDays: 90, retentionVar: "FACTLINE_PAYLOAD_RETENTION_DAYS" }

/**
 * The workflows entry: when the app runs workflows (or the entry is there), one workflow bound as
 * FACTLINE_WORKFLOWS of class FactlineWorkflow (wrangler does not inherit it into an environment).
 */
export const workflowProblems = (entries: ReadonlyArray<{ readonly name?: string; readonly binding?: string; readonly class_name?: string }> | undefined, required: boolean): Array<string> => {
  const { binding, className } = bindings.workflows
  const entry = (entries ?? []).find((w) => w.binding === binding)
  const wanted = `{ name: "factline-workflows", binding: "${binding}", class_name: "${className}" }`
  if (entry === undefined) return required ? [`workflows: missing ${wanted} (the app's modules declare workflows; wrangler does not inherit it into an environment)`] : []
  const problems: Array<string> = []
  if (entry.class_name !== className) problems.push(`workflows[${binding}].class_name is ${JSON.stringify(entry.class_name)}: it must be "${className}" (export it from the Worker's entry)`)
  if (typeof entry.name !== "string" || entry.name === "") problems.push(`workflows[${binding}] has no name: ${wanted}`)
  return problems
}
