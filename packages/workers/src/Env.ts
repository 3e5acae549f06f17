/**
 * The bindings a factline Worker expects (names as in the example's wrangler.jsonc).
 *
 * Queue producer bindings follow the policy table: `<NAME>_QUEUE` and
 * `<NAME>_DLQ` for EVENTS, PROJECTIONS, FACT_PROCESSING, WEBHOOKS, BATCH; the
 * grouped ones (EVENTS, PROJECTIONS, FACT_PROCESSING) add `<NAME>_QUEUE_<g>`
 * for each tenant group g > 0 (QueueGroups).
 */
import type { EndpointLimiter, LedgerNamespace, Workflows } from "@factline/core/runtime"

export interface PlatformEnv {
  /** The platform database: shard registry, tenant placement map, metrics, batch inbox. */
  readonly DB: D1Database
  /**
   * The read databases (`FACTLINE_READ_DB_0`, `_1`, …, numbered without gaps): each tenant's read side lives in
   * one of them (Placement). Read database 0 is the platform database when `FACTLINE_READ_DB_0` is not bound.
   */
  readonly FACTLINE_READ_DB_0?: D1Database
  /** Read database indexes new tenants may be placed on, comma-separated (default: all). */
  readonly FACTLINE_READ_DBS_OPEN?: string
  /** Seconds an isolate trusts a tenant's placement (default 30); a move waits twice this before its last copy. */
  readonly FACTLINE_PLACEMENT_CACHE_SECONDS?: string
  readonly PAYLOADS: R2Bucket
  /** The LedgerShard Durable Object namespace (a `DurableObjectNamespace<LedgerShard>`: its stubs answer the shard protocol). */
  readonly LEDGER: LedgerNamespace.LedgerShardNamespace
  /**
   * The EndpointLimiter Durable Object namespace: one object per webhook endpoint that sets `max_per_second` or
   * `max_in_flight`. Without it, deliveries to such an endpoint retry naming it; other endpoints are unaffected.
   */
  readonly WEBHOOK_LIMITER?: EndpointLimiter.EndpointLimiterNamespace
  readonly EVENTS_QUEUE: Queue
  readonly EVENTS_DLQ: Queue
  readonly BATCH_QUEUE: Queue
  readonly [binding: string]: unknown
  /**
   * JSON array of `{ "sha256": "<hex of the token>", "tenant_id": "...", "scopes": [...] }`.
   * A secret in production (`wrangler secret put FACTLINE_TOKENS`); `.dev.vars` locally.
   */
  readonly FACTLINE_TOKENS?: string
  /** Multiplies retry delays (a number or a fraction, `1/60`: `npm run dev` sets it in .dev.vars); tests set `0` so retries come back at once. Defaults to 1. */
  readonly FACTLINE_RETRY_DELAY_SCALE?: string
  /**
   * Ledger shards per tenant, recorded for each tenant when it is first seen and
   * never changed for it afterwards (default 16, at most 1024).
   */
  readonly FACTLINE_LEDGER_SHARDS?: string
  /** Tenant groups of the events, projections and fact-processing queues (default 4, 1…32); wrangler config declares that many. */
  readonly FACTLINE_QUEUE_GROUPS?: string
  /** The R2 bucket name used in `payload_ref` (defaults to `factline-payloads`). */
  readonly FACTLINE_PAYLOAD_BUCKET?: string
  /**
   * Base64 of 32 random bytes: the AES-GCM key webhook signing secrets are sealed with.
   * A secret in production (`wrangler secret put FACTLINE_SECRETS_KEY`); `.dev.vars` locally.
   */
  readonly FACTLINE_SECRETS_KEY?: string
  /**
   * `"true"` only for local development (`npm run dev`, the tests): webhook endpoints may then use
   * plain http and loopback addresses. Never set it in production.
   */
  readonly FACTLINE_LOCAL_DEVELOPMENT?: string
  /**
   * Development only (`npm run dev` sets `10m`): accepted events are kept in R2 this long, so
   * `factline recover` can re-send those the local queues lost in a restart. Default off.
   */
  readonly FACTLINE_KEEP_ACCEPTED?: string
  /** Hours an endpoint may fail every delivery before it is disabled (default 120 = 5 days). */
  readonly FACTLINE_WEBHOOK_DISABLE_AFTER_HOURS?: string
  /** Seconds endpoint configs are cached per isolate (default 10). */
  readonly FACTLINE_WEBHOOK_CONFIG_TTL_SECONDS?: string
  /** Consumers' log lines: `batch` (default: a line per batch with its counts, and one per failed attempt), `all` (also one per acked attempt), `failures`, or `none`. */
  readonly FACTLINE_LOG_ATTEMPTS?: string
  /** Which attempts the runs view records: `failures` (default), `all` (what `npm run dev` sets), or `none`. */
  readonly FACTLINE_RUNS?: string
  /**
   * Milliseconds of wall time a consumer invocation may spend before it hands the messages it has not started back
   * to the queue (default 20000: two thirds of the default 30 s CPU limit; raise it with `limits.cpu_ms`).
   */
  readonly FACTLINE_CONSUMER_BUDGET_MS?: string
  /**
   * The static assets binding (`assets.binding` in wrangler.jsonc, directory `@factline/workers/dist/assets`):
   * the dashboard and /docs pages. Optional: without it those two routes answer 404 saying how to add it.
   */
  /** Cloudflare Workflows: the binding of class FactlineWorkflow that runs every module's workflows (absent: none run). */
  readonly FACTLINE_WORKFLOWS?: Workflows.WorkflowBinding
  readonly ASSETS?: Fetcher
  /**
   * The HTTP edge's default per-tenant rate limit: a Rate Limiting binding (`ratelimits` in wrangler config,
   * `simple: { limit, period: 10 }`), keyed by tenant. Other tiers are `FACTLINE_RATE_LIMIT_<TIER>`. Not bound:
   * requests are not limited.
   */
  readonly FACTLINE_RATE_LIMIT?: RateLimit
  /** JSON `{ "*": tier, "<tenant id>": tier }`: the rate-limit tier of each tenant (default `default` for all; `unlimited` counts nothing). */
  readonly FACTLINE_RATE_LIMIT_TIERS?: string
  /** Optional Workers Analytics Engine dataset binding: one data point per consumer batch (seed 001's metrics). */
  readonly METRICS?: AnalyticsEngineDataset
}
