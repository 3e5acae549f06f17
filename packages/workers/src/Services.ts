/**
 * The one composition point of the Worker: its `env` becomes the leaf layers
 * of core's one composition (`PlatformLayer`) — each binding behind its
 * service, the `FACTLINE_*` variables behind a `ConfigProvider` read with
 * `Config` — and the one `ManagedRuntime` per isolate that every request and
 * queue batch runs on. This is the only module that reads `env`.
 *
 * It does not compose services (core does, once, for the Worker and the Node
 * test kit alike).
 */
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { type Registry } from "@factline/core"
import { Bindings, EndpointLimits, LedgerNamespace, PlatformLayer, QueueGroups, Settings, Telemetry } from "@factline/core/runtime"
import type { PlatformEnv } from "./Env.js"

/** A platform queue's (a group queue's, or a DLQ's) producer binding by queue name; undefined for an unknown queue or a missing binding. */
const queueBinding = (env: PlatformEnv) => (queue: string) => {
  const binding = QueueGroups.bindingOf(queue)
  return binding === undefined ? undefined : env[binding] as Queue | undefined
}

/** Most read databases a deployment binds (`FACTLINE_READ_DB_0` … `FACTLINE_READ_DB_63`). */
const maxReadDatabases = 64

/**
 * The read databases of `env` by index: `FACTLINE_READ_DB_<n>` up to the highest one bound, read database 0
 * being the platform database when not bound. A gap is a deploy defect (a tenant placed there would be lost).
 */
export const readDatabases = (env: PlatformEnv): ReadonlyArray<D1Database> => {
  const bound = Array.from({ length: maxReadDatabases }, (_, i) => env[`FACTLINE_READ_DB_${i}`] as D1Database | undefined)
  const count = bound.findLastIndex((db) => db !== undefined) + 1
  const databases = bound.slice(0, Math.max(count, 1))
  databases[0] ??= env.DB
  const gap = databases.findIndex((db) => db === undefined)
  if (gap >= 0) throw new Error(`FACTLINE_READ_DB_${gap} is not bound but FACTLINE_READ_DB_${count - 1} is: bind the read databases without gaps`)
  return databases as ReadonlyArray<D1Database>
}

/** Every binding of `env` behind its service, but the ledger namespace (which only the platform's programs call). */
const bindings = (env: PlatformEnv) =>
  Bindings.layer({
    database: env.DB,
    readDatabases: readDatabases(env),
    payloads: env.PAYLOADS,
    queue: queueBinding(env),
    analytics: Bindings.AnalyticsEngine.layer(env.METRICS),
    ...(env.FACTLINE_WORKFLOWS === undefined ? {} : { workflows: env.FACTLINE_WORKFLOWS })
  })

/** The `FACTLINE_*` variables (and any other string var) of `env`, for `Config`. */
const provider = (env: PlatformEnv) => ConfigProvider.fromUnknown(Object.fromEntries(Object.entries(env).filter(([, value]) => typeof value === "string")))
const settings = (env: PlatformEnv) => ConfigProvider.layer(provider(env))

const settingsCache = new WeakMap<object, Settings.Shape>()
/**
 * The settings of `env`, read with the same `Config` as the runtime's: for the one reader outside a program,
 * the HTTP API's token check, which runs before any route's program.
 */
export const settingsOf = (env: PlatformEnv): Settings.Shape => {
  let read = settingsCache.get(env)
  if (read === undefined) {
    read = Effect.runSync(Settings.config.parse(provider(env)))
    settingsCache.set(env, read)
  }
  return read
}

/** Every service the platform's programs use, and the span exporter's flusher (Telemetry: off unless FACTLINE_OTLP_ENDPOINT is set). */
export type PlatformServices = PlatformLayer.Services | Telemetry.Flusher

/** A bad setting (a shard count out of range) is a defect of the deploy: every request and batch fails with it, naming the variable. */
export const platformLayer = (env: PlatformEnv, registry: Registry.Shape): Layer.Layer<PlatformServices> =>
  Layer.merge(
    PlatformLayer.make(registry, Layer.mergeAll(bindings(env), LedgerNamespace.LedgerNamespace.layer(env.LEDGER), EndpointLimits.EndpointLimits.layer(env.WEBHOOK_LIMITER)), { defaultSource: "http" }),
    Telemetry.layer
  ).pipe(Layer.provide(settings(env)), Layer.orDie)

export type PlatformRuntime = ManagedRuntime.ManagedRuntime<PlatformServices, never>

/**
 * One runtime per isolate and bindings object, built on first use and shared
 * by every request and batch after it: layers are not rebuilt per request.
 * (A Worker's `env` is the same object for the isolate's lifetime; a test
 * that passes other bindings gets its own runtime.)
 */
export const runtimes = (registry: Registry.Shape) => {
  const cache = new WeakMap<object, PlatformRuntime>()
  return (env: PlatformEnv): PlatformRuntime => {
    let runtime = cache.get(env)
    if (runtime === undefined) {
      runtime = ManagedRuntime.make(platformLayer(env, registry))
      cache.set(env, runtime)
    }
    return runtime
  }
}

/** What a LedgerShard Durable Object reaches: the bindings, the settings and the shard's services over them (PlatformLayer.shardServices). */
export type ShardServices = Bindings.Services | Settings.Settings | PlatformLayer.ShardServices
export type ShardRuntime = ManagedRuntime.ManagedRuntime<ShardServices, never>

const shardRuntimes = new WeakMap<object, ShardRuntime>()
/** The Durable Object's runtime over its `env`, one per isolate and bindings object. */
export const shardRuntime = (env: PlatformEnv): ShardRuntime => {
  let runtime = shardRuntimes.get(env)
  if (runtime === undefined) {
    runtime = ManagedRuntime.make(PlatformLayer.shardServices.pipe(
      Layer.provideMerge(Layer.merge(bindings(env), Settings.Settings.layer)),
      Layer.provide(settings(env)),
      Layer.orDie
    ))
    shardRuntimes.set(env, runtime)
  }
  return runtime
}

/**
 * Whether this `env` exports spans (`FACTLINE_OTLP_ENDPOINT` set): the Worker then flushes them with
 * `ctx.waitUntil` after each invocation, and schedules nothing otherwise.
 */
export const exportsTraces = (env: PlatformEnv): boolean => {
  const endpoint = env[Telemetry.endpointVariable]
  return typeof endpoint === "string" && endpoint.trim() !== ""
}

/** A Rate Limiting binding by name (`FACTLINE_RATE_LIMIT`, `FACTLINE_RATE_LIMIT_<TIER>`): the HTTP edge's per-tenant limit; undefined when not bound. */
export const rateLimiter = (env: PlatformEnv, binding: string): RateLimit | undefined => {
  const bound = env[binding] as Partial<RateLimit> | undefined
  return typeof bound?.limit === "function" ? bound as RateLimit : undefined
}

/** The static assets binding (`assets.binding` in wrangler.jsonc): the dashboard and /docs; undefined if the app has none. */
export const staticAssets = (env: PlatformEnv): Fetcher | undefined => env.ASSETS
