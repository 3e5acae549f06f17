/**
 * The platform's settings (`FACTLINE_*`), read once per runtime with Effect's
 * `Config` from whatever `ConfigProvider` the composition was given: the
 * Worker builds one from its `env`, the test kit from its options. Defaults
 * and validation are the ones the variables have always had: a shard count out
 * of range fails the runtime with an error naming the variable; the lenient
 * numbers fall back to their default when they do not parse, as before.
 *
 * It does not read bindings (`Bindings`) and holds no secrets beyond passing
 * the configured ones on.
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Deadline from "../consuming/Deadline.js"
import * as QueueGroups from "../consuming/QueueGroups.js"
import * as Shards from "../ledger/Shards.js"
import * as FactsCopy from "../projections/FactsCopy.js"
import { defaultBucketName } from "../producing/PayloadStore.js"
import * as KeptEvents from "../producing/KeptEvents.js"
import * as KeyRetention from "../producing/KeyRetention.js"
import * as WorkflowInstances from "../workflows/Instances.js"

export type LogAttempts = "all" | "batch" | "failures" | "none"
/** `FACTLINE_RUNS`: which attempts the runs view records (consuming/Runs.ts). */
export type RunsLevel = "all" | "failures" | "none"

/**
 * Which rate-limit tier counts each tenant's requests at the HTTP edge (`FACTLINE_RATE_LIMIT_TIERS`): a
 * tier is a Cloudflare Rate Limiting binding (`default` is `FACTLINE_RATE_LIMIT`, any other `x` is
 * `FACTLINE_RATE_LIMIT_X`; `unlimited` counts nothing) whose limit wrangler config states.
 */
export interface RateLimitTiers {
  /** The tier of every tenant `tenants` does not name (the value's `*`; `default` without one). */
  readonly fallback: string
  /** Tier by tenant id. */
  readonly tenants: ReadonlyMap<string, string>
}

export interface Shape {
  /** `FACTLINE_TOKENS`: JSON of the token hashes (see the HTTP API's Auth), as configured. */
  readonly tokens: string | undefined
  /**
   * `FACTLINE_RETRY_DELAY_SCALE`: multiplies retry delays — a number or a fraction (`1/60`: `npm run dev`'s
   * development scale, seconds instead of minutes; tests set 0); default 1, production's.
   */
  readonly retryDelayScale: number
  /** `FACTLINE_LEDGER_SHARDS`: shards recorded for tenants seen from now on (default 16, 1…1024). */
  readonly ledgerShardsPerTenant: number
  /** `FACTLINE_QUEUE_GROUPS`: tenant groups of the events, projections and fact-processing queues (default 4, 1…32); wrangler config must declare that many. */
  readonly queueGroups: number
  /** `FACTLINE_PAYLOAD_BUCKET`: the bucket name in `payload_ref` (default `factline-payloads`). */
  readonly payloadBucket: string
  /** `FACTLINE_SECRETS_KEY`: base64 of the AES-GCM key webhook signing secrets are sealed with. */
  readonly secretsKey: string | undefined
  /**
   * `FACTLINE_KEY_CACHE_SECONDS` (default 60): how long an isolate keeps a data subject's key — the bound within
   * which an erased key is gone from every isolate (personal/KeyRing.ts).
   */
  readonly keyCacheMs: number
  /**
   * `FACTLINE_REFUSE_ERASED_SUBJECTS`: tenants (comma-separated, or `*` for all) that refuse new personal data of
   * an erased data subject (a 422 `subject_erased`); elsewhere such data gets a new key.
   */
  readonly refuseErasedSubjects: (tenant: string) => boolean
  /** `FACTLINE_LOCAL_DEVELOPMENT=true`: http and loopback webhook endpoints allowed (never in production). */
  readonly localDevelopment: boolean
  /**
   * `FACTLINE_KEEP_ACCEPTED` (`10m`; default off): development only — accepted events are kept in R2 this long,
   * so `factline recover` can re-send those a restart of the local queues lost (KeptEvents). 0: off.
   */
  readonly keepAcceptedMs: number
  /** `FACTLINE_WEBHOOK_DISABLE_AFTER_HOURS` (default 120), in milliseconds. */
  readonly webhookDisableAfterMs: number
  /** `FACTLINE_WEBHOOK_CONFIG_TTL_SECONDS` (default 10), in milliseconds. */
  readonly webhookConfigTtlMs: number
  /** `FACTLINE_WEBHOOK_ENDPOINTS_PER_TENANT` (default 20): a tenant's endpoints, so one fact's fan-out stays bounded. */
  readonly webhookEndpointsPerTenant: number
  /**
   * `FACTLINE_LOG_ATTEMPTS`: `batch` (default: one line per consumer batch with its counts, and one per attempt
   * that did not succeed), `all` (also one per acked attempt: opt-in, it costs CPU per message), `failures`
   * (the failures' lines alone) or `none`. See Consumer.LogLevel.
   */
  readonly logAttempts: LogAttempts
  /**
   * `FACTLINE_RUNS`: `failures` (default: the attempts that do not succeed at once, and every later attempt of
   * their messages), `all` (every attempt: `npm run dev`) or `none`.
   */
  readonly runs: RunsLevel
  /**
   * `FACTLINE_CONSUMER_BUDGET_MS` (default 20000): the wall-clock time a consumer invocation may spend before it
   * stops starting new units of work and hands the messages not started back to the queue (consuming/Deadline.ts).
   * Keep it well under the Worker's CPU limit (`limits.cpu_ms`, default 30 s) and the 15-minute wall limit.
   */
  readonly consumerBudgetMs: number
  /**
   * `FACTLINE_FACTS_COPY`: which facts the D1 `facts` copy gets — `none` (default), `all`, or fact types
   * separated by commas. The ledger answers every stream read itself; the copy is for SQL over many streams.
   */
  readonly factsCopy: FactsCopy.FactsCopy
  /** `FACTLINE_FACTS_WINDOW_DAYS`: whole days of facts the D1 `facts` copy keeps; older days are archived to R2 (default 30). */
  readonly factsWindowDays: number
  /**
   * `FACTLINE_READ_DBS_OPEN`: the read databases (indexes, comma-separated) new tenants are placed on, the
   * least-used first (default: every bound one). Close a filling database to new tenants by leaving it out.
   */
  readonly readDatabasesOpen: ReadonlyArray<number> | undefined
  /**
   * `FACTLINE_ALERT_QUIET_MINUTES` (default 15), in milliseconds: after an alert, a better level (and new dead
   * letters) wait this long before the next alert of its key; a worse level is sent at once.
   */
  readonly alertQuietMs: number
  /** `FACTLINE_PLACEMENT_CACHE_SECONDS` (default 30): how long an isolate trusts a tenant's placement; a move waits twice this before its last copy. */
  readonly placementCacheMs: number
  /**
   * `FACTLINE_METRICS_FLUSH_SECONDS` (default 10; 0: every batch), in milliseconds: how long an isolate may keep
   * clean consumer batches' metrics and its sent counts before writing them to the rollup (Metrics.record).
   */
  readonly metricsFlushMs: number
  /**
   * `FACTLINE_WORKFLOW_OVERDUE_SECONDS` (default 60), in milliseconds: how long past its time a workflow instance may
   * still be sleeping or waiting before the scheduled run's watchdog wakes it (Maintenance.wakeOverdueWorkflows).
   */
  readonly workflowOverdueMs: number
  /** `FACTLINE_RATE_LIMIT_TIERS`: JSON `{ "*": tier, "<tenant>": tier, … }` (default: every tenant on `default`). */
  readonly rateLimitTiers: RateLimitTiers
  /**
   * `FACTLINE_LEDGER_HOT_DAYS`: how many days of a tenant's facts its ledger shards keep in SQLite; older facts move to
   * cold segments in R2 (operations/ColdTiering.ts, which the maintenance run hands this function). Whole days, for every tenant (`30`, the default) or per tenant as
   * JSON `{ "*": 30, "<tenant>": 90, … }`; a tenant given `null` (or `"*": null`) is never tiered.
   */
  readonly ledgerHotDays: (tenant: string) => number | undefined
  /**
   * `FACTLINE_KEY_RETENTION_DAYS`: how long a tenant's accepted idempotency keys are kept (producing/KeyRetention.ts):
   * whole days (default 30, at least 1) for every tenant, or per tenant as JSON `{ "*": 30, "<tenant>": 7, … }`.
   */
  readonly keyRetention: KeyRetention.Retention
}

/** The default hot window of the ledger, in days (docs/operating.md argues it). */
export const defaultLedgerHotDays = 30

/** `FACTLINE_LEDGER_HOT_DAYS` → each tenant's hot window in days (undefined: never tiered), or what is wrong with it. */
export const parseLedgerHotDays = (raw: string | undefined): ((tenant: string) => number | undefined) | string => {
  if (raw === undefined || raw.trim() === "") return () => defaultLedgerHotDays
  const days = (value: unknown) => typeof value === "number" && Number.isInteger(value) && value >= 0
  if (/^\s*\d+\s*$/.test(raw)) {
    const n = Number(raw)
    return () => n
  }
  let json: unknown
  try {
    json = JSON.parse(raw)
  } catch {
    json = undefined
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return `must be whole days (e.g. 45) or a JSON object of tenant id (or "*") → days or null, got ${JSON.stringify(raw)}`
  const entries = Object.entries(json as Record<string, unknown>)
  const bad = entries.find(([, value]) => value !== null && !days(value))
  if (bad !== undefined) return `${JSON.stringify(bad[0])}: days must be a whole number from 0 up, or null (never tiered), got ${JSON.stringify(bad[1])}`
  const tenants = new Map(entries as Array<[string, number | null]>)
  const fallback = tenants.has("*") ? tenants.get("*")! : defaultLedgerHotDays
  return (tenant) => (tenants.has(tenant) ? tenants.get(tenant)! : fallback) ?? undefined
}

const optional = (name: string) => Config.option(Config.String(name)).pipe(Config.map(Option.getOrUndefined))

/** A non-negative number, or `fallback` when absent or unparsable (these never failed a deploy). */
const lenientNumber = (name: string, fallback: number) =>
  optional(name).pipe(Config.map((raw) => {
    const n = raw === undefined || raw === "" ? NaN : Number(raw)
    return Number.isFinite(n) && n >= 0 ? n : fallback
  }))

/**
 * A delay scale: a non-negative number (`0.5`) or a fraction (`1/60`); undefined when absent or unparsable
 * (the scale falls back to 1, as it always has: a typo never failed a deploy).
 */
export const parseScale = (raw: string | undefined): number | undefined => {
  if (raw === undefined || raw.trim() === "") return undefined
  const fraction = /^\s*(\d+(?:\.\d+)?)\s*\/\s*(\d+(?:\.\d+)?)\s*$/.exec(raw)
  const n = fraction === null ? Number(raw) : Number(fraction[1]) / Number(fraction[2])
  return Number.isFinite(n) && n >= 0 ? n : undefined
}

const shardCount = optional("FACTLINE_LEDGER_SHARDS").pipe(Config.mapEffect((raw) => {
  if (raw === undefined || raw === "") return Effect.succeed(Shards.defaultShardsPerTenant)
  return Effect.try({
    try: () => Shards.checkShardCount(Number(raw)),
    catch: (error) => new Error(`FACTLINE_LEDGER_SHARDS: ${error instanceof Error ? error.message : String(error)}`)
  }).pipe(Effect.orDie)
}))

const queueGroups = optional("FACTLINE_QUEUE_GROUPS").pipe(Config.mapEffect((raw) => {
  if (raw === undefined || raw === "") return Effect.succeed(QueueGroups.defaultGroups)
  const n = Number(raw)
  return Number.isInteger(n) && n >= 1 && n <= QueueGroups.maxGroups
    ? Effect.succeed(n)
    : Effect.die(new Error(`FACTLINE_QUEUE_GROUPS: must be a whole number from 1 to ${QueueGroups.maxGroups}, got ${JSON.stringify(raw)}`))
}))

/** A tier name: lower-case letters, digits and `_`, as its binding's suffix reads upper-cased. */
const tierName = /^[a-z][a-z0-9_]{0,31}$/

/** `FACTLINE_RATE_LIMIT_TIERS` → the tiers; anything but an object of tier names fails the runtime, naming the entry. */
export const parseRateLimitTiers = (raw: string | undefined): RateLimitTiers | string => {
  if (raw === undefined || raw.trim() === "") return { fallback: "default", tenants: new Map() }
  let json: unknown
  try {
    json = JSON.parse(raw)
  } catch {
    return "must be a JSON object of tenant id (or \"*\" for every other tenant) → tier name"
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return "must be a JSON object of tenant id (or \"*\" for every other tenant) → tier name"
  const entries = Object.entries(json as Record<string, unknown>)
  const bad = entries.find(([, tier]) => typeof tier !== "string" || !tierName.test(tier))
  if (bad !== undefined) return `${JSON.stringify(bad[0])}: the tier must be lower-case letters, digits and _ (default, unlimited, or the suffix of a FACTLINE_RATE_LIMIT_<TIER> binding), got ${JSON.stringify(bad[1])}`
  const tiers = new Map(entries as Array<[string, string]>)
  const fallback = tiers.get("*") ?? "default"
  tiers.delete("*")
  return { fallback, tenants: tiers }
}

export const config: Config.Config<Shape> = Config.all({
  tokens: optional("FACTLINE_TOKENS"),
  retryDelayScale: optional("FACTLINE_RETRY_DELAY_SCALE").pipe(Config.map((raw) => parseScale(raw) ?? 1)),
  ledgerShardsPerTenant: shardCount,
  queueGroups,
  payloadBucket: optional("FACTLINE_PAYLOAD_BUCKET").pipe(Config.map((name) => name === undefined || name === "" ? defaultBucketName : name)),
  secretsKey: optional("FACTLINE_SECRETS_KEY"),
  keyCacheMs: lenientNumber("FACTLINE_KEY_CACHE_SECONDS", 60).pipe(Config.map((seconds) => seconds * 1000)),
  refuseErasedSubjects: optional("FACTLINE_REFUSE_ERASED_SUBJECTS").pipe(Config.map((raw) => {
    const tenants = new Set((raw ?? "").split(",").map((t) => t.trim()).filter((t) => t !== ""))
    return (tenant: string) => tenants.has("*") || tenants.has(tenant)
  })),
  localDevelopment: optional("FACTLINE_LOCAL_DEVELOPMENT").pipe(Config.map((raw) => raw === "true")),
  keepAcceptedMs: optional(KeptEvents.variable).pipe(Config.mapEffect((raw) => {
    const ms = KeptEvents.parseDuration(raw)
    return typeof ms === "string" ? Effect.die(new Error(ms)) : Effect.succeed(ms)
  })),
  webhookDisableAfterMs: lenientNumber("FACTLINE_WEBHOOK_DISABLE_AFTER_HOURS", 120).pipe(Config.map((hours) => hours * 3600 * 1000)),
  webhookConfigTtlMs: lenientNumber("FACTLINE_WEBHOOK_CONFIG_TTL_SECONDS", 10).pipe(Config.map((seconds) => seconds * 1000)),
  webhookEndpointsPerTenant: lenientNumber("FACTLINE_WEBHOOK_ENDPOINTS_PER_TENANT", 20).pipe(Config.map(Math.floor)),
  logAttempts: optional("FACTLINE_LOG_ATTEMPTS").pipe(Config.map((raw): LogAttempts => raw === "all" || raw === "failures" || raw === "none" ? raw : "batch")),
  runs: optional("FACTLINE_RUNS").pipe(Config.map((raw): RunsLevel => raw === "all" || raw === "none" ? raw : "failures")),
  consumerBudgetMs: lenientNumber("FACTLINE_CONSUMER_BUDGET_MS", Deadline.defaultBudgetMs),
  factsCopy: optional(FactsCopy.variable).pipe(Config.mapEffect((raw) => {
    const copy = FactsCopy.parse(raw)
    return typeof copy === "string" ? Effect.die(new Error(copy)) : Effect.succeed(copy)
  })),
  factsWindowDays: lenientNumber("FACTLINE_FACTS_WINDOW_DAYS", 30).pipe(Config.map(Math.floor)),
  readDatabasesOpen: optional("FACTLINE_READ_DBS_OPEN").pipe(Config.mapEffect((raw) => {
    if (raw === undefined || raw.trim() === "") return Effect.succeed(undefined)
    const indexes = raw.split(",").map((part) => Number(part.trim()))
    return indexes.every((n) => Number.isInteger(n) && n >= 0)
      ? Effect.succeed(indexes)
      : Effect.die(new Error(`FACTLINE_READ_DBS_OPEN: must list read database indexes (0, 1, …) separated by commas, got ${JSON.stringify(raw)}`))
  })),
  placementCacheMs: lenientNumber("FACTLINE_PLACEMENT_CACHE_SECONDS", 30).pipe(Config.map((seconds) => seconds * 1000)),
  rateLimitTiers: optional("FACTLINE_RATE_LIMIT_TIERS").pipe(Config.mapEffect((raw) => {
    const parsed = parseRateLimitTiers(raw)
    return typeof parsed === "string" ? Effect.die(new Error(`FACTLINE_RATE_LIMIT_TIERS: ${parsed}`)) : Effect.succeed(parsed)
  })),
  ledgerHotDays: optional("FACTLINE_LEDGER_HOT_DAYS").pipe(Config.mapEffect((raw) => {
    const parsed = parseLedgerHotDays(raw)
    return typeof parsed === "string" ? Effect.die(new Error(`FACTLINE_LEDGER_HOT_DAYS: ${parsed}`)) : Effect.succeed(parsed)
  })),
  keyRetention: optional("FACTLINE_KEY_RETENTION_DAYS").pipe(Config.mapEffect((raw) => {
    const parsed = KeyRetention.parse(raw)
    return typeof parsed === "string" ? Effect.die(new Error(`FACTLINE_KEY_RETENTION_DAYS: ${parsed}`)) : Effect.succeed(parsed)
  })),
  alertQuietMs: lenientNumber("FACTLINE_ALERT_QUIET_MINUTES", 15).pipe(Config.map((minutes) => minutes * 60_000)),
  metricsFlushMs: lenientNumber("FACTLINE_METRICS_FLUSH_SECONDS", 10).pipe(Config.map((seconds) => seconds * 1000)),
  workflowOverdueMs: lenientNumber("FACTLINE_WORKFLOW_OVERDUE_SECONDS", WorkflowInstances.overdueAfterSeconds).pipe(Config.map((seconds) => seconds * 1000))
})

export class Settings extends Context.Service<Settings, Shape>()("@factline/core/Settings") {
  /** Read from the current `ConfigProvider`. */
  static readonly layer = Layer.effect(Settings, Effect.map(config, Settings.of))
}
