/**
 * `makePlatform(modules)`: a whole factline Worker from a product team's modules.
 *
 * Returns `{ fetch, queue, scheduled }`: the HTTP API (then, after the response, the isolate's metrics
 * tally when due — `Metrics.flushPending`), the queue dispatcher (each batch one span in its messages' trace
 * when spans are exported: Telemetry, flushed with `ctx.waitUntil` after every invocation)
 * (a table from queue name to its consumer program: the five platform queues
 * and every dead-letter queue) and the scheduled maintenance (core's
 * `Maintenance.run`). The registry is built here, at module load, so a
 * misconfiguration (two handlers for one type) fails the deploy, not a
 * message. In local development (`FACTLINE_LOCAL_DEVELOPMENT=true`, as `.dev.vars` sets it) a
 * registry error does not throw: the module loads, the error is logged once at start-up, every
 * request answers a 500 `registry_invalid` naming it and every queue message is retried, so
 * `wrangler dev` shows the registry's message alone (a throw at load makes it add "a problem with
 * the workerd binary" and "no LedgerShard class", both wrong). Export the LedgerShard class beside
 * it from the Worker's entry.
 *
 * Every program runs on the isolate's one runtime (Services); nothing here
 * reads a binding or builds a layer.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { type Module, Registry } from "@factline/core"
import {
  BatchConsumer,
  DeadLetterConsumer,
  EventsConsumer,
  Maintenance,
  Metrics,
  ProcessingConsumer,
  ProjectionConsumer,
  QueueGroups,
  RetryPolicy,
  Settings,
  Telemetry,
  WebhookConsumer
} from "@factline/core/runtime"
import type { PlatformEnv } from "./Env.js"
import * as FactlineWorkflow from "./FactlineWorkflow.js"
import * as Api from "./http/Api.js"
import * as LoadTimeEnv from "./LoadTimeEnv.js"
import * as Services from "./Services.js"

export interface Platform {
  /** The registry built from the modules (checked at module load). */
  readonly registry: Registry.Shape
  /** The runtime of these bindings: one per isolate, shared by every request and batch. */
  readonly runtime: (env: PlatformEnv) => Services.PlatformRuntime
  readonly fetch: (request: Request, env: PlatformEnv, ctx: ExecutionContext) => Promise<Response>
  readonly queue: (batch: MessageBatch<unknown>, env: PlatformEnv, ctx: ExecutionContext) => Promise<void>
  readonly scheduled: (controller: ScheduledController, env: PlatformEnv, ctx: ExecutionContext) => Promise<void>
}

type Counts = {
  readonly acked?: number
  readonly retried?: number
  readonly deadLettered?: number
  readonly deadLetteredByReason?: Readonly<Record<string, number>>
}
type ConsumerProgram = (batch: MessageBatch<unknown>, settings: Settings.Shape) => Effect.Effect<Counts | void, never, Services.PlatformServices>

const options = (settings: Settings.Shape) => ({ delayScale: settings.retryDelayScale, log: settings.logAttempts, runs: settings.runs })

/** The consumer program of each purpose of the queue table: a queue added to RetryPolicy fails to typecheck here until it has one. */
const programs: { readonly [P in RetryPolicy.Purpose]: ConsumerProgram } = {
  events: (batch, settings) => EventsConsumer.consume(batch, options(settings)),
  projections: (batch, settings) => ProjectionConsumer.consume(batch, options(settings)),
  factProcessing: (batch, settings) => ProcessingConsumer.consume(batch, options(settings)),
  webhooks: (batch, settings) => WebhookConsumer.consume(batch, { ...options(settings), disableAfterMs: settings.webhookDisableAfterMs, localDevelopment: settings.localDevelopment }),
  batch: (batch, settings) => BatchConsumer.consume(batch, options(settings))
}

/**
 * Queue name (a grouped purpose's logical name stands for each of its group queues) → the consumer of its batches:
 * derived from the queue table, each purpose's program and every dead-letter queue's DeadLetterConsumer.
 */
export const consumers: ReadonlyMap<string, ConsumerProgram> = new Map<string, ConsumerProgram>([
  ...RetryPolicy.purposes.map((purpose) => [RetryPolicy.byPurpose[purpose].queue, programs[purpose]] as const),
  ...RetryPolicy.all.map((policy) => [policy.deadLetterQueue, (batch: MessageBatch<unknown>) => DeadLetterConsumer.consume(batch)] as const)
])

/**
 * One batch: its consumer, then one metrics sample (D1 rollup + Analytics Engine point) for the platform
 * queues. A queue this Worker does not know is retried (never dropped) so the misconfiguration is visible.
 */
export const consume = (batch: MessageBatch<unknown>): Effect.Effect<void, never, Services.PlatformServices> =>
  Effect.gen(function*() {
    // A group queue (`factline-events-3`) is consumed as its purpose (`factline-events`).
    const purpose = QueueGroups.purposeOf(batch.queue)
    const consumer = consumers.get(purpose)
    if (consumer === undefined) {
      yield* Effect.logError(`no consumer for queue ${batch.queue}`)
      for (const m of batch.messages) m.retry({ delaySeconds: 60 })
      return
    }
    const started = yield* Clock.currentTimeMillis
    const settings = yield* Settings.Settings
    // Exporting spans (Telemetry), the batch is one span in its first message's trace, linked to the others'.
    const counts = yield* consumer(batch, settings).pipe(Telemetry.continuing(`${purpose} process`, () => batch.messages.flatMap((m) => Telemetry.traceparentsOf(m.body)), {
      kind: "consumer",
      attributes: { "messaging.system": "cloudflare_queues", "messaging.destination.name": batch.queue, "messaging.batch.message_count": batch.messages.length }
    }))
    if (RetryPolicy.isDeadLetterQueue(batch.queue)) return
    const now = yield* Clock.currentTimeMillis
    // Recorded under its purpose, with its group: health adds the group queues' backlogs up.
    yield* Metrics.record(Metrics.sampleOf(batch, counts ?? undefined, now - started, now), settings.metricsFlushMs)
  })

/** The spans this invocation ended, sent to the collector after it (only when exporting: nothing is scheduled otherwise). */
const flushTraces = (runtime: Services.PlatformRuntime, env: PlatformEnv, ctx: ExecutionContext) => {
  if (Services.exportsTraces(env)) ctx.waitUntil(runtime.runPromise(Telemetry.flush).catch(() => undefined))
}

/** The isolate's metrics tally, written when its interval has passed (at most every 10 s from here). */
const flushPending = Effect.flatMap(Settings.Settings, (settings) => Metrics.flushPending(Math.max(Metrics.edgeFlushIntervalMs, settings.metricsFlushMs)))

export interface Options {
  /**
   * Whether a registry error is answered rather than thrown (see the header). Default: the Worker's
   * `FACTLINE_LOCAL_DEVELOPMENT` setting, read at module load.
   */
  readonly localDevelopment?: boolean
}


/**
 * The platform of a module list the registry refused, in local development: it loads (so wrangler
 * reports nothing else), and says the registry's message on start-up, on every request (500
 * `registry_invalid`) and for every queue batch (retried, never dropped, so nothing is lost once fixed).
 */
const refused = (error: Registry.RegistryConfigError): Platform => {
  const message = `factline: the registry refused the module list (src/modules.ts): ${error.message}`
  console.error(message)
  const body = JSON.stringify({ error: { code: "registry_invalid", message } })
  return {
    // workerd reads the default export's properties at load: nothing here may throw (an empty registry).
    registry: Registry.make([]),
    runtime: () => {
      throw error
    },
    fetch: async () => new Response(body, { status: 500, headers: { "content-type": "application/json" } }),
    queue: async (batch) => {
      console.error(`${message} (${batch.messages.length} message(s) of ${batch.queue} retried)`)
      batch.retryAll({ delaySeconds: 10 })
    },
    scheduled: async () => {
      console.error(message)
    }
  }
}

export const makePlatform = (modules: ReadonlyArray<Module.Module>, options: Options = {}): Platform => {
  let registry: Registry.Shape
  try {
    registry = Registry.make(modules)
  } catch (error) {
    if (error instanceof Registry.RegistryConfigError && (options.localDevelopment ?? LoadTimeEnv.localDevelopmentAtLoad())) return refused(error)
    throw error
  }
  const runtime = Services.runtimes(registry)
  FactlineWorkflow.install(runtime)
  const api = Api.make(runtime)

  return {
    registry,
    runtime,
    fetch: async (request, env, ctx) => {
      const response = await api.fetch(request, env)
      // Messages the request sent are tallied in the isolate; after the response the tally is written when due
      // (Metrics.flushPending: at most every 10 s, or FACTLINE_METRICS_FLUSH_SECONDS if longer) — consumer batches carry it in between.
      ctx.waitUntil(runtime(env).runPromise(flushPending).catch(() => undefined))
      flushTraces(runtime(env), env, ctx)
      return response
    },
    queue: (batch, env, ctx) => runtime(env).runPromise(consume(batch)).finally(() => flushTraces(runtime(env), env, ctx)),
    // The maintenance, then this isolate's metrics tally when due (an idle consumer isolate's last counts).
    scheduled: (_controller, env, ctx) =>
      runtime(env).runPromise(Effect.flatMap(Settings.Settings, (settings) => Maintenance.run({ alertQuietMs: settings.alertQuietMs, ledgerHotDays: settings.ledgerHotDays, keyRetention: settings.keyRetention, workflowOverdueMs: settings.workflowOverdueMs })).pipe(Effect.andThen(flushPending)))
        .finally(() => flushTraces(runtime(env), env, ctx))
  }
}
