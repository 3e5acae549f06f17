/**
 * The Cloudflare bindings the platform reaches, each behind one service:
 * D1 through its door (`Sql.PlatformDatabase`), the queues by name
 * (`QueueBindings`), the payload bucket (`PayloadBucket`, R2), the ledger
 * shards (`LedgerNamespace`, the Durable Object) and Analytics Engine
 * (`AnalyticsEngine`). These are the leaves of the one composition
 * (`PlatformLayer`): the Worker builds them from its `env`, the Node test kit
 * from the in-memory stand-ins of `testing/MemoryBindings`, and everything
 * above them is the same code.
 *
 * It does not name env variables: which binding is called what is the
 * Worker's business (`@factline/workers`' Services).
 */
import { Context, Effect, Layer } from "effect"
import { PlatformDatabase } from "./Sql.js"

/** A factline queue's producer binding by queue name (platform queues and their DLQs); undefined when not bound. */
export class QueueBindings extends Context.Service<QueueBindings, {
  readonly queue: (name: string) => Queue | undefined
}>()("@factline/core/QueueBindings") {}

/** The R2 bucket of large payloads and batch files (its name in `payload_ref`s is a setting). */
export class PayloadBucket extends Context.Service<PayloadBucket, {
  readonly bucket: R2Bucket
}>()("@factline/core/PayloadBucket") {}

/** The LedgerShard Durable Object namespace. */
export class LedgerNamespace extends Context.Service<LedgerNamespace, {
  readonly namespace: DurableObjectNamespace
}>()("@factline/core/LedgerNamespace") {}

/**
 * Workers Analytics Engine: one data point per consumer batch when a dataset is bound. Writing is
 * fire-and-forget in Cloudflare's API; the service keeps it so (a failure to write is not the batch's).
 */
export class AnalyticsEngine extends Context.Service<AnalyticsEngine, {
  readonly writeDataPoint: (point: AnalyticsEngineDataPoint) => Effect.Effect<void>
}>()("@factline/core/AnalyticsEngine") {
  /** Over a dataset binding; without one (not configured), points are dropped. */
  static readonly layer = (dataset: AnalyticsEngineDataset | undefined) =>
    Layer.succeed(AnalyticsEngine, {
      writeDataPoint: (point) => dataset === undefined ? Effect.void : Effect.sync(() => dataset.writeDataPoint(point))
    })
  /** Records the points in `written`, for tests. */
  static readonly memory = (written: Array<AnalyticsEngineDataPoint>) =>
    Layer.succeed(AnalyticsEngine, { writeDataPoint: (point) => Effect.sync(() => void written.push(point)) })
}

/** The bindings one platform runs on, however they were made (a Worker's env, in-memory stand-ins). */
export interface Bindings {
  readonly database: D1Database
  readonly payloads: R2Bucket
  readonly ledger: DurableObjectNamespace
  readonly queue: (name: string) => Queue | undefined
  readonly analytics: Layer.Layer<AnalyticsEngine>
}

export type Services = PlatformDatabase | QueueBindings | PayloadBucket | LedgerNamespace | AnalyticsEngine

/** Every binding's service, from the bindings. */
export const layer = (bindings: Bindings): Layer.Layer<Services> =>
  Layer.mergeAll(
    PlatformDatabase.layer(bindings.database),
    Layer.succeed(QueueBindings, { queue: bindings.queue }),
    Layer.succeed(PayloadBucket, { bucket: bindings.payloads }),
    Layer.succeed(LedgerNamespace, { namespace: bindings.ledger }),
    bindings.analytics
  )
