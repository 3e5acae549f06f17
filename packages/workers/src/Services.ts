/**
 * The live layers of core's services, built from a Worker's bindings, and
 * the one `ManagedRuntime` per isolate that every request and queue batch
 * runs on. This is the only place where bindings meet the framework.
 */
import { Layer, ManagedRuntime } from "effect"
import {
  AcceptedKeys, BatchFiles, DeadLetters, DeadLetterStore, Inbox, Ledger, PayloadStore, Producer, ProjectionStore, QueueProducer, Registry, RetryPolicy, Shards, WebhookStore, WebhookTransport
} from "@factline/core"
import type { PlatformEnv } from "./Env.js"

const deadLetterQueue = (env: PlatformEnv) => (queue: string) => {
  const policy = RetryPolicy.forQueue(queue)
  return policy ? (env[policy.deadLetterBinding] as Queue | undefined) : undefined
}

/** A platform queue's producer binding by queue name (undefined for an unknown queue or a missing binding). */
export const queueBinding = (env: PlatformEnv) => (queue: string) => {
  const policy = RetryPolicy.forQueue(queue)
  return policy && policy.queue === queue ? (env[policy.binding] as Queue | undefined) : undefined
}

/** `FACTLINE_LEDGER_SHARDS`: the shard count recorded for tenants seen from now on (default 16). */
export const shardsPerTenant = (env: PlatformEnv): number => {
  const raw = env.FACTLINE_LEDGER_SHARDS
  return raw === undefined || raw === "" ? Shards.defaultShardsPerTenant : Shards.checkShardCount(Number(raw))
}

const ledgerLayer = (env: PlatformEnv) => Ledger.Ledger.layer(env.LEDGER, env.DB, shardsPerTenant(env))

/** Every service the platform's programs use: the registry and one live layer per binding. */
export type PlatformServices =
  | Registry.Registry
  | Ledger.Ledger
  | Inbox.Inbox
  | ProjectionStore.ProjectionStore
  | DeadLetters.DeadLetters
  | PayloadStore.PayloadStore
  | QueueProducer.QueueProducer
  | AcceptedKeys.AcceptedKeys
  | Producer.Producer
  | WebhookStore.WebhookStore
  | WebhookTransport.WebhookTransport
  | DeadLetterStore.DeadLetterStore
  | BatchFiles.BatchFiles

const number = (raw: string | undefined, fallback: number) => {
  const n = raw === undefined || raw === "" ? NaN : Number(raw)
  return Number.isFinite(n) && n >= 0 ? n : fallback
}

/** `FACTLINE_LOCAL_DEVELOPMENT=true`: http and loopback webhook endpoints allowed (never in production). */
export const localDevelopment = (env: PlatformEnv) => env.FACTLINE_LOCAL_DEVELOPMENT === "true"
export const webhookDisableAfterMs = (env: PlatformEnv) => number(env.FACTLINE_WEBHOOK_DISABLE_AFTER_HOURS, 120) * 3600 * 1000

const webhookCatalog = (registry: Registry.Shape): WebhookStore.Catalog => ({
  eventTypes: new Set(registry.webhookEvents.keys()),
  eventTypesOfFact: (factType) => registry.webhooksFor(factType).map((e) => e.type)
})

export const platformLayer = (env: PlatformEnv, registry: Registry.Shape): Layer.Layer<PlatformServices> => {
  const payloads = PayloadStore.PayloadStore.layer(env.PAYLOADS, env.FACTLINE_PAYLOAD_BUCKET)
  return Layer.mergeAll(
    Layer.succeed(Registry.Registry, registry),
    ledgerLayer(env),
    AcceptedKeys.AcceptedKeys.layer(env.DB),
    QueueProducer.QueueProducer.layer(queueBinding(env)),
    Inbox.Inbox.layer(env.DB),
    ProjectionStore.ProjectionStore.layer(env.DB),
    DeadLetters.DeadLetters.layer(deadLetterQueue(env)),
    AcceptedKeys.AcceptedKeys.layer(env.DB),
    payloads,
    Producer.Producer.layer({ queue: env.EVENTS_QUEUE, definitions: registry.definitions, defaultSource: "http" }).pipe(Layer.provide(payloads)),
    WebhookStore.WebhookStore.layer(env.DB, {
      secretsKey: env.FACTLINE_SECRETS_KEY,
      localDevelopment: localDevelopment(env),
      configTtlMs: number(env.FACTLINE_WEBHOOK_CONFIG_TTL_SECONDS, 10) * 1000
    }, webhookCatalog(registry)),
    WebhookTransport.WebhookTransport.layer,
    DeadLetterStore.DeadLetterStore.layer(env.DB),
    BatchFiles.BatchFiles.layer(env.PAYLOADS)
  )
}

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

/** The static assets binding (`assets.binding` in wrangler.jsonc): the dashboard and /docs; undefined if the app has none. */
export const staticAssets = (env: PlatformEnv): Fetcher | undefined => env.ASSETS
