/**
 * A whole factline platform in memory, for tests in plain Node: the registry
 * of your modules and every service's in-memory layer (ledger shards and D1
 * over in-memory SQLite, queues that record, an R2 stand-in). Programs run
 * exactly as in the Worker — the same consumers, the same SQL — minus the
 * queue broker: what a consumer sends downstream is recorded in `queues`.
 *
 * ```ts
 * const platform = TestPlatform.make(modules)
 * const outcomes = await platform.run(Dispatch.dispatch(items))
 * ```
 */
import { is } from "drizzle-orm"
import { SQLiteTable } from "drizzle-orm/sqlite-core"
import type { Effect } from "effect"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import type { Module } from "../definitions/Module.js"
import * as QueueGroups from "../consuming/QueueGroups.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import { LedgerNamespace } from "../ledger/LedgerNamespace.js"
import { EndpointLimits } from "../webhooks/EndpointLimits.js"
import * as Bindings from "../platform/Bindings.js"
import * as PlatformLayer from "../composition/PlatformLayer.js"
import * as Secrets from "../webhooks/Secrets.js"
import * as Registry from "../registry/Registry.js"
import * as PlatformTables from "../tables/PlatformTables.js"
import { createTable } from "./Ddl.js"
import { memoryBucket, memoryD1, memoryLedgerNamespace, memoryQueue } from "./MemoryBindings.js"

export type Services = PlatformLayer.Services

export interface TestPlatform {
  readonly registry: Registry.Shape
  readonly db: ReturnType<typeof memoryD1>
  readonly ledger: ReturnType<typeof memoryLedgerNamespace>
  /** Every platform queue and DLQ by queue name, recording what was sent. */
  readonly queues: ReadonlyMap<string, ReturnType<typeof memoryQueue>>
  readonly bucket: ReturnType<typeof memoryBucket>
  /** The Analytics Engine data points written (one per consumer batch whose metrics were recorded). */
  readonly dataPoints: ReadonlyArray<AnalyticsEngineDataPoint>
  readonly layer: Layer.Layer<Services>
  /** Runs a program on this platform's services. */
  readonly run: <A, E>(program: Effect.Effect<A, E, Services>) => Promise<A>
}

const platformTables: ReadonlyArray<SQLiteTable> = (Object.values(PlatformTables) as ReadonlyArray<unknown>).filter((t): t is SQLiteTable => is(t, SQLiteTable))

export interface Options extends Registry.Options {
  /** Shards per tenant (default 1: a test needs no spread). */
  readonly shardsPerTenant?: number
  /** Settings as the Worker's env would carry them (`FACTLINE_*`), read through the same `Config`. */
  readonly settings?: Readonly<Record<string, string>>
}

export const make = (modules: ReadonlyArray<Module>, options: Options = {}): TestPlatform => {
  const registry = Registry.make(modules, options)
  const db = memoryD1()
  for (const table of [...platformTables, ...registry.projections.map((p) => p.table)]) {
    for (const statement of createTable(table)) db.sqlite.exec(statement)
  }
  const ledger = memoryLedgerNamespace()
  const queues = new Map<string, ReturnType<typeof memoryQueue>>()
  // Every group queue of a grouped purpose (the settings' FACTLINE_QUEUE_GROUPS, as the Worker's wrangler config would declare them).
  const groups = Number(options.settings?.FACTLINE_QUEUE_GROUPS ?? QueueGroups.defaultGroups)
  for (const policy of RetryPolicy.all) {
    for (const name of QueueGroups.queuesOf(policy, Number.isInteger(groups) && groups >= 1 ? groups : 1)) queues.set(name, memoryQueue())
    queues.set(policy.deadLetterQueue, memoryQueue())
  }
  const bucket = memoryBucket()
  const dataPoints: Array<AnalyticsEngineDataPoint> = []
  // The same composition as the Worker's; only the leaves are in memory.
  const bindings = Layer.merge(
    Bindings.layer({ database: db, payloads: bucket, queue: (name) => queues.get(name), analytics: Bindings.AnalyticsEngine.memory(dataPoints) }),
    LedgerNamespace.layer(ledger)
  ).pipe(Layer.merge(EndpointLimits.memory()))
  // A platform key of its own (personal data is sealed under keys it wraps), unless the settings give one.
  const settings = ConfigProvider.fromUnknown({ FACTLINE_LEDGER_SHARDS: String(options.shardsPerTenant ?? 1), FACTLINE_SECRETS_KEY: Secrets.generateKey(), ...options.settings })
  const layer = PlatformLayer.make(registry, bindings, { defaultSource: "test" }).pipe(Layer.provide(ConfigProvider.layer(settings)), Layer.orDie)
  const runtime = ManagedRuntime.make(layer)
  return { registry, db, ledger, queues, bucket, dataPoints, layer, run: (program) => runtime.runPromise(program) }
}
