/**
 * The Cloudflare bindings the platform reaches, each behind one service:
 * D1 through its door (`Sql.PlatformDatabase`), the queues by name
 * (`QueueBindings`, behind the `Queues` door), the payload bucket (`PayloadBucket`, R2) and Analytics
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
import { type QueueBinding, QueueBindings } from "./Queues.js"
import { type Bucket, PayloadBucket } from "./Storage.js"
import { type WorkflowBinding, Workflows } from "./Workflows.js"

/** The read databases (`FACTLINE_READ_DB_0…`) by index, each behind its door; empty when none is bound (the platform database serves). */
export class ReadDatabases extends Context.Service<ReadDatabases, {
  readonly databases: ReadonlyArray<Sql>
}>()("@factline/core/ReadDatabases") {}

/** The queues' producer bindings by name and the door over them: `Queues`. */
export { type QueueBinding, QueueBindings } from "./Queues.js"

/** The payload bucket's door (R2) and the raw binding it wraps: `Storage`. */
export { type Bucket, type BucketObject, PayloadBucket } from "./Storage.js"

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
  readonly queue: (name: string) => QueueBinding | undefined
  readonly analytics: Layer.Layer<AnalyticsEngine>
  /** The `workflows` binding (class FactlineWorkflow), when the platform runs workflows. */
  readonly workflows?: WorkflowBinding
}

export type Services = PlatformDatabase | ReadDatabases | QueueBindings | PayloadBucket | AnalyticsEngine | Workflows

/** Every binding's service, from the bindings. */
export const layer = (bindings: Bindings): Layer.Layer<Services> =>
  Layer.mergeAll(
    PlatformDatabase.layer(bindings.database),
    Layer.succeed(ReadDatabases, { databases: (bindings.readDatabases ?? []).map((binding, i) => door(`read_${i}`, binding)) }),
    Layer.succeed(QueueBindings, { queue: bindings.queue }),
    PayloadBucket.layer(bindings.payloads),
    bindings.analytics,
    Workflows.layer(bindings.workflows)
  )
