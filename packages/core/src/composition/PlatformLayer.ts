/**
 * The one composition: bindings + settings → every service the platform's
 * programs use. The Worker (`@factline/workers`) gives it the layers of its
 * `env`'s bindings and a `ConfigProvider` over the same `env`; the Node test
 * kit (`testing/TestPlatform`) gives it in-memory bindings and a provider over
 * its options. Nothing above the leaves differs between the two.
 *
 * It does not read env variables or bindings itself (`Bindings`, `Settings`),
 * and builds no runtime: the caller keeps one `ManagedRuntime` per isolate.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { DeadLetters } from "../consuming/DeadLetters.js"
import { FirstAttempts } from "../consuming/FirstAttempts.js"
import { Inbox } from "../consuming/Inbox.js"
import { Runs } from "../consuming/Runs.js"
import * as QueueGroups from "../consuming/QueueGroups.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import { BatchFiles } from "../batch/BatchFiles.js"
import { Ledger } from "../ledger/Ledger.js"
import { LedgerNamespace } from "../ledger/LedgerNamespace.js"
import * as SealedLedger from "../ledger/SealedLedger.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as DataSubject from "../personal/DataSubject.js"
import { KeyStores } from "../personal/KeyStorage.js"
import { DeadLetterStore } from "../operations/DeadLetterStore.js"
import * as MetricsTally from "../operations/MetricsTally.js"
import { AcceptedKeys } from "../producing/AcceptedKeys.js"
import { PayloadStore } from "../producing/PayloadStore.js"
import * as KeptEvents from "../producing/KeptEvents.js"
import * as KeyReceipts from "../producing/KeyReceipts.js"
import { Producer } from "../producing/Producer.js"
import { ProjectionStore } from "../projections/ProjectionStore.js"
import * as Registry from "../registry/Registry.js"
import { ModuleLayers } from "../registry/ModuleLayers.js"
import { type Catalog, WebhookStore } from "../webhooks/WebhookStore.js"
import { WebhookTransport } from "../webhooks/WebhookTransport.js"
import { Resolver } from "../webhooks/Resolver.js"
import type { EndpointLimits } from "../webhooks/EndpointLimits.js"
import * as Bindings from "../platform/Bindings.js"
import { Queues } from "../platform/Queues.js"
import * as Deadline from "../consuming/Deadline.js"
import { Settings } from "./Settings.js"
import { FactsWindow } from "../archive/Archive.js"
import { FactsCopySetting } from "../projections/FactsCopy.js"
import { TenantPlacement } from "../placement/Placement.js"
import { WorkflowRecords } from "../workflows/WorkflowRecords.js"

/** Every service the platform's programs use: the registry, the settings, the bindings and the stores over them. */
export type Services =
  | Registry.Registry
  | ModuleLayers
  | Settings
  | Bindings.Services
  | LedgerNamespace
  | Ledger
  | KeyRing
  | DataSubject.DataSubjects
  | Inbox
  | FirstAttempts
  | Runs
  | ProjectionStore
  | DeadLetters
  | PayloadStore
  | Queues
  | AcceptedKeys
  | KeyReceipts.KeyReceipts
  | Producer
  | WebhookStore
  | WebhookTransport
  | Resolver
  | EndpointLimits
  | DeadLetterStore
  | BatchFiles
  | FactsWindow
  | FactsCopySetting
  | TenantPlacement
  | MetricsTally.MetricsTally
  | WorkflowRecords

export interface Options {
  /** `source` of events accepted without one (`http` in the Worker). */
  readonly defaultSource: string
}

const webhookCatalog = (registry: Registry.Shape): Catalog => ({
  eventTypes: new Set(registry.webhookEvents.keys()),
  eventTypesOfFact: (factType) => registry.webhooksFor(factType).map((e) => e.type)
})

/** The services over the bindings and settings (what the leaves are made of is the caller's). */
export const services = (registry: Registry.Shape, options: Options) =>
  Layer.unwrap(Effect.gen(function*() {
    const settings = yield* Settings
    // Every send to a platform queue is tallied for `messages_sent_total` by the queues' door (Metrics writes the
    // tally with the rollup).
    const tally = MetricsTally.make()
    const groups = settings.queueGroups
    const queues = Queues.layer({ route: (name, tenantId) => QueueGroups.route(name, tenantId, groups), count: MetricsTally.countSent(tally) })
    const storage = yield* Bindings.PayloadBucket
    const payloads = PayloadStore.layer(storage, settings.payloadBucket)
    // Personal data: the tenants' key stores are objects of the LedgerShard class; the platform key wraps their keys.
    const { namespace } = yield* LedgerNamespace
    const keyRing = KeyRing.layer({
      secretsKey: settings.secretsKey,
      cacheMs: settings.keyCacheMs,
      refuseErased: settings.refuseErasedSubjects
    }).pipe(Layer.provide(KeyStores.layer(namespace)))
    // The edge signs the keys it binds; the events consumer verifies and skips its own claim for them.
    const receipts = KeyReceipts.make(settings.secretsKey)
    return Layer.mergeAll(
      Layer.succeed(KeyReceipts.KeyReceipts, receipts),
      Layer.succeed(Registry.Registry, registry),
      // Each module's services, built once with the runtime (per isolate), not per message.
      ModuleLayers.layer(registry.modules),
      Layer.succeed(MetricsTally.MetricsTally, tally),
      // Each consumer invocation's time budget (Consumer.run reads it; Deadline).
      Layer.succeed(Deadline.Budget, settings.consumerBudgetMs),
      keyRing,
      // Which data subject a queue message carries personal data of: what runs, dead letters and webhook attempts record for erasure.
      DataSubject.DataSubjects.layer(registry),
      SealedLedger.layer(registry.personalFact, registry.hasPersonalData).pipe(Layer.provide(Layer.merge(Ledger.layer(settings.ledgerShardsPerTenant), keyRing))),
      AcceptedKeys.layer,
      Inbox.layer,
      FirstAttempts.layer,
      Runs.layer,
      ProjectionStore.layer,
      DeadLetters.layer.pipe(Layer.provide(queues)),
      payloads,
      Producer.layer({
        queue: RetryPolicy.events.queue,
        definitions: registry.definitions,
        defaultSource: options.defaultSource,
        ...(settings.keepAcceptedMs > 0 ? { keep: KeptEvents.keeper(storage) } : {}),
        receipts
      }).pipe(Layer.provide(Layer.mergeAll(payloads, queues, keyRing))),
      queues,
      WebhookStore.layer({
        secretsKey: settings.secretsKey,
        localDevelopment: settings.localDevelopment,
        configTtlMs: settings.webhookConfigTtlMs,
        endpointsPerTenant: settings.webhookEndpointsPerTenant
      }, webhookCatalog(registry)),
      WebhookTransport.layer,
      Resolver.layer({ localDevelopment: settings.localDevelopment }),
      DeadLetterStore.layer,
      BatchFiles.layer(storage),
      FactsWindow.layer(settings.factsWindowDays),
      FactsCopySetting.layer(settings.factsCopy),
      WorkflowRecords.layer
    ).pipe(Layer.provideMerge(TenantPlacement.layer({ open: settings.readDatabasesOpen, cacheMs: settings.placementCacheMs })))
  }))

/** What a ledger shard's runtime reaches beside the bindings and settings (it runs no registry's programs). */
export type ShardServices = Queues | MetricsTally.MetricsTally | PayloadStore

/**
 * The ledger shard's services: the queues' door — routing by the deployment's groups, counting into the shard
 * runtime's own tally, which the shard writes after each relay (`Metrics.recordSent`) — and the payload store
 * its relay offloads large facts to.
 */
export const shardServices = Layer.unwrap(Effect.gen(function*() {
  const settings = yield* Settings
  const tally = MetricsTally.make()
  const groups = settings.queueGroups
  return Layer.mergeAll(
    Layer.succeed(MetricsTally.MetricsTally, tally),
    Queues.layer({ route: (name, tenantId) => QueueGroups.route(name, tenantId, groups), count: MetricsTally.countSent(tally) }),
    PayloadStore.layer(yield* Bindings.PayloadBucket, settings.payloadBucket)
  )
}))

/** The whole platform: the services over the given bindings, with the settings read from the current `ConfigProvider`. */
export const make = (registry: Registry.Shape, bindings: Layer.Layer<Bindings.Services | LedgerNamespace | EndpointLimits>, options: Options) => {
  const leaves = Layer.merge(bindings, Settings.layer)
  return services(registry, options).pipe(Layer.provideMerge(leaves))
}
