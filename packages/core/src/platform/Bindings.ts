/**
 * The Cloudflare bindings the platform reaches, each behind one service:
 * D1 through its door (`Sql.PlatformDatabase`), the queues by name
 * (`QueueBindings`), the payload bucket (`PayloadBucket`, R2) and Analytics
 * Engine (`AnalyticsEngine`); the ledger shards' Durable Object namespace is
 * the ledger's own (`ledger/LedgerNamespace`, typed by its protocol). These
 * are the leaves of the one composition (`PlatformLayer`): the Worker builds
 * them from its `env`, the Node test kit from the in-memory stand-ins of
 * `testing/MemoryBindings`, and everything above them is the same code.
 *
 * It does not name env variables: which binding is called what is the
 * Worker's business (`@factline/workers`' Services).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { make as door, PlatformDatabase, type Sql } from "./Sql.js"

/** The read databases (`FACTLINE_READ_DB_0…`) by index, each behind its door; empty when none is bound (the platform database serves). */
export class ReadDatabases extends Context.Service<ReadDatabases, {
  readonly databases: ReadonlyArray<Sql>
}>()("@factline/core/ReadDatabases") {}

/** A factline queue's producer binding by queue name (platform queues and their DLQs); undefined when not bound. */
export class QueueBindings extends Context.Service<QueueBindings, {
  readonly queue: (name: string) => Queue | undefined
}>()("@factline/core/QueueBindings") {}

/**
 * The part of an R2 bucket the payload store and the batch files use: an `R2Bucket` is one, and so is the
 * test kit's in-memory bucket. Objects are put from a string, bytes (the facts archive's Parquet) or a stream,
 * read whole or by byte range, listed by prefix, and deleted (a spilled dead letter once it is in D1).
 */
export interface Bucket {
  put(key: string, value: string | Uint8Array | ReadableStream<Uint8Array>, options?: { readonly httpMetadata?: { readonly contentType?: string } }): Promise<{ readonly size: number } | null>
  get(key: string, options?: { readonly range?: { readonly offset: number; readonly length: number } }): Promise<BucketObject | null>
  head(key: string): Promise<{ readonly size: number } | null>
  list(options: { readonly prefix: string; readonly cursor?: string }): Promise<{ readonly objects: ReadonlyArray<{ readonly key: string }>; readonly truncated: boolean; readonly cursor?: string }>
  delete(keys: string | Array<string>): Promise<void>
}

/** An object read from a `Bucket` (the requested range of it). */
export interface BucketObject {
  readonly body: ReadableStream<Uint8Array>
  text(): Promise<string>
  arrayBuffer(): Promise<ArrayBuffer>
}

/** The R2 bucket of large payloads and batch files (its name in `payload_ref`s is a setting). */
export class PayloadBucket extends Context.Service<PayloadBucket, {
  readonly bucket: Bucket
}>()("@factline/core/PayloadBucket") {}

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
  /** The read databases, by index (none: the platform database holds every tenant's read side). */
  readonly readDatabases?: ReadonlyArray<D1Database>
  readonly payloads: Bucket
  readonly queue: (name: string) => Queue | undefined
  readonly analytics: Layer.Layer<AnalyticsEngine>
}

export type Services = PlatformDatabase | ReadDatabases | QueueBindings | PayloadBucket | AnalyticsEngine

/** Every binding's service, from the bindings. */
export const layer = (bindings: Bindings): Layer.Layer<Services> =>
  Layer.mergeAll(
    PlatformDatabase.layer(bindings.database),
    Layer.succeed(ReadDatabases, { databases: (bindings.readDatabases ?? []).map((binding, i) => door(`read_${i}`, binding)) }),
    Layer.succeed(QueueBindings, { queue: bindings.queue }),
    Layer.succeed(PayloadBucket, { bucket: bindings.payloads }),
    bindings.analytics
  )
