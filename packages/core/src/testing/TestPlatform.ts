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
import { type Effect, Layer, ManagedRuntime } from "effect"
import type { Module } from "../definitions/Module.js"
import { AcceptedKeys } from "../producing/AcceptedKeys.js"
import { DeadLetters } from "../consuming/DeadLetters.js"
import { Inbox } from "../consuming/Inbox.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as LedgerModule from "../ledger/Ledger.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import { PayloadStore } from "../producing/PayloadStore.js"
import { Producer } from "../producing/Producer.js"
import { QueueProducer } from "../producing/QueueProducer.js"
import { ProjectionStore } from "../projections/ProjectionStore.js"
import * as Registry from "../registry/Registry.js"
import * as PlatformTables from "../tables/PlatformTables.js"
import { createTable } from "./Ddl.js"
import { memoryBucket, memoryD1, memoryLedgerNamespace, memoryQueue } from "./MemoryBindings.js"

export type Services =
  | Registry.Registry
  | LedgerModule.Ledger
  | Inbox
  | ProjectionStore
  | DeadLetters
  | PayloadStore
  | QueueProducer
  | AcceptedKeys
  | Producer

export interface TestPlatform {
  readonly registry: Registry.Shape
  readonly db: ReturnType<typeof memoryD1>
  readonly ledger: ReturnType<typeof memoryLedgerNamespace>
  /** Every platform queue and DLQ by queue name, recording what was sent. */
  readonly queues: ReadonlyMap<string, ReturnType<typeof memoryQueue>>
  readonly bucket: ReturnType<typeof memoryBucket>
  readonly layer: Layer.Layer<Services>
  /** Runs a program on this platform's services. */
  readonly run: <A, E>(program: Effect.Effect<A, E, Services>) => Promise<A>
}

const platformTables: ReadonlyArray<SQLiteTable> = (Object.values(PlatformTables) as ReadonlyArray<unknown>).filter((t): t is SQLiteTable => is(t, SQLiteTable))

export interface Options extends Registry.Options {
  /** Shards per tenant (default 1: a test needs no spread). */
  readonly shardsPerTenant?: number
}

export const make = (modules: ReadonlyArray<Module>, options: Options = {}): TestPlatform => {
  const registry = Registry.make(modules, options)
  const db = memoryD1()
  for (const table of [...platformTables, ...registry.projections.map((p) => p.table)]) {
    for (const statement of createTable(table)) db.sqlite.exec(statement)
  }
  const ledger = memoryLedgerNamespace()
  const queues = new Map<string, ReturnType<typeof memoryQueue>>()
  for (const policy of RetryPolicy.all) {
    queues.set(policy.queue, memoryQueue())
    queues.set(policy.deadLetterQueue, memoryQueue())
  }
  const bucket = memoryBucket()
  const payloads = PayloadStore.layer(bucket)
  const layer = Layer.mergeAll(
    Layer.succeed(Registry.Registry, registry),
    Layer.succeed(LedgerModule.Ledger, LedgerModule.make(ledger, LedgerTopology.make(db, options.shardsPerTenant ?? 1))),
    QueueProducer.layer((queue) => queues.get(queue)),
    Inbox.layer(db),
    ProjectionStore.layer(db),
    DeadLetters.layer((queue) => queues.get(RetryPolicy.forQueue(queue)?.deadLetterQueue ?? "")),
    AcceptedKeys.layer(db),
    payloads,
    Producer.layer({ queue: queues.get(RetryPolicy.events.queue)!, definitions: registry.definitions, defaultSource: "test" }).pipe(Layer.provide(payloads))
  )
  const runtime = ManagedRuntime.make(layer)
  return { registry, db, ledger, queues, bucket, layer, run: (program) => runtime.runPromise(program) }
}
