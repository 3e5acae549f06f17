/**
 * What a workflow step costs (issue 37), beside a queue hop: the bench's `bench-steps` workflow runs K no-op
 * Activity steps (`step.do`, nothing inside) and one `append` (a `step.do` that appends one fact to the ledger,
 * relays it and notes its id on the instance's row) on the local Cloudflare Workflows binding, through the
 * platform's own entrypoint and runner. The bench's entrypoint (`FactlineWorkflow` here, exported by the bench
 * Worker) times every `step.do` and counts the binding calls made inside it (CountingBindings: D1 round trips,
 * LedgerShard RPCs, queue sends), and outside the steps (the instance's row: running, complete); its output carries
 * them, so the driver reads them from `status().output`.
 *
 * Under the production profile every binding call waits its latency (Latency.ts), and every `step.do` waits one
 * `workflow_step` draw on top of its callback: the engine persisting the step's result before the body goes on.
 * Cloudflare publishes no figure for that (its limits page gives sizes and counts, not latencies); the table's
 * figure is an estimate, named there.
 *
 * The queue hop beside it: `bench-hop` (the fact queues' settings, 100 / 0.5 s) gets one message at a time — its
 * send under the same profile — and its consumer notes, per message, the time from before the send to its start.
 */
import type { WorkflowEvent, WorkflowStep } from "cloudflare:workers"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Activity from "effect/workflow/Activity"
import { FactDefinition, Module, Processor, Workflow } from "@factline/core"
import { FactId, WorkflowInstances } from "@factline/core/runtime"
import * as CountingBindings from "@factline/core/testing/bindings"
import type { Fact } from "@factline/schemas"
import { FactlineWorkflow as PlatformWorkflow, type PlatformEnv } from "@factline/workers"
import * as Latency from "./Latency.js"

export const BenchStepsStarted = FactDefinition.make("bench_steps_started", Schema.Struct({ steps: Schema.Number }))
export const BenchStepsDone = FactDefinition.make("bench_steps_done", Schema.Struct({ steps: Schema.Number }))

/** K no-op steps, then one append. */
export const benchSteps = Workflow.make({
  name: "bench-steps",
  start: BenchStepsStarted,
  emits: [BenchStepsDone],
  run: (started, wf) =>
    Effect.gen(function*() {
      for (let i = 0; i < started.data.steps; i++) {
        yield* Activity.make({ name: `noop-${i}`, success: Schema.Number, execute: Effect.succeed(i) })
      }
      yield* wf.append("done", [BenchStepsDone.make({ steps: started.data.steps })])
    })
})

/**
 * The registry wants a workflow's start fact emitted by a handler or processor of the module list. The bench starts
 * its instances itself (`start`, with the start fact inline), so this processor only declares it: it listens to the
 * workflow's own end fact and appends nothing.
 */
const declaresStart = Processor.make(BenchStepsDone, { name: "bench-steps-declared", emits: [BenchStepsStarted], process: () => Effect.succeed([]) })

export const benchModule = Module.make("bench", { processors: [declaresStart], workflows: [benchSteps] })

type Counted = Omit<CountingBindings.Counts, "shards">
const snapshot = (c: CountingBindings.Counts): Counted => ({
  d1RoundTrips: c.d1RoundTrips, d1Statements: c.d1Statements, d1RowsRead: c.d1RowsRead, d1RowsWritten: c.d1RowsWritten,
  doRpcs: c.doRpcs, queueSends: c.queueSends, queueMessages: c.queueMessages, queueUnits: c.queueUnits
})
const minus = (a: Counted, b: Counted): Counted => Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v - (b as any)[k]])) as Counted

/** One `step.do` as the bench saw it: its name, wall time and the binding calls made while it ran. */
export interface StepTiming {
  readonly name: string
  readonly ms: number
  readonly calls: Counted
}

/** The platform's entrypoint, timed and counted (and under the bench's latency profile). */
export class FactlineWorkflow extends PlatformWorkflow {
  #own: PlatformEnv | undefined
  override async run(event: Readonly<WorkflowEvent<unknown>>, step: WorkflowStep): Promise<unknown> {
    this.#own ??= this.env
    const counts = CountingBindings.make()
    ;(this as unknown as { env: PlatformEnv }).env = CountingBindings.env(Latency.env(this.#own as unknown as Record<string, unknown>), counts) as unknown as PlatformEnv
    const steps: Array<StepTiming> = []
    const started = performance.now()
    const timed = {
      do: async (name: string, config: unknown, callback: () => Promise<unknown>) => {
        const before = snapshot(counts)
        const t0 = performance.now()
        const result = await Latency.workflowStep(this.#own as unknown as Record<string, unknown>, () => step.do(name, config as never, callback as () => Promise<never>))
        steps.push({ name, ms: performance.now() - t0, calls: minus(snapshot(counts), before) })
        return result
      },
      sleep: (name: string, duration: never) => step.sleep(name, duration),
      sleepUntil: (name: string, timestamp: never) => step.sleepUntil(name, timestamp),
      waitForEvent: (name: string, options: never) => step.waitForEvent(name, options)
    } as unknown as WorkflowStep
    const output = await super.run(event, timed)
    return { ...(output as object), bench: { ms: performance.now() - started, steps, total: snapshot(counts) } }
  }
}

/** Starts `n` instances of `bench-steps` with `steps` no-op steps each (the driver's own calls, not profiled). */
export const start = async (env: PlatformEnv & { readonly FACTLINE_WORKFLOWS: Workflow }, run: string, n: number, steps: number) => {
  const tenant_id = "tenant-a"
  const ids = await Promise.all(Array.from({ length: n }, async (_, i) => {
    const stream = `${run}_c${i}`
    const instance_id = await WorkflowInstances.instanceId(benchSteps.name, tenant_id, stream)
    const fact: Fact = {
      fact_id: await FactId.make({ tenantId: tenant_id, cause: stream, decidedBy: "bench", position: 0 }),
      tenant_id, stream, sequence: 1, type: BenchStepsStarted.type, data: { steps },
      causation_id: stream, correlation_id: stream, caused_by: "bench", created_at: new Date().toISOString()
    }
    const params: WorkflowInstances.Params = { workflow: benchSteps.name, tenant_id, stream, instance_id, fact_id: fact.fact_id, fact }
    await env.FACTLINE_WORKFLOWS.create({ id: instance_id, params })
    return instance_id
  }))
  return ids
}

/** The instances' status and, once complete, what the bench's entrypoint measured. */
export const status = async (env: { readonly FACTLINE_WORKFLOWS: Workflow }, ids: ReadonlyArray<string>) =>
  Promise.all(ids.map(async (id) => {
    const s = await (await env.FACTLINE_WORKFLOWS.get(id)).status()
    return { id, status: s.status, output: s.output ?? null, error: s.error ?? null }
  }))

// ---- the queue hop beside it ------------------------------------------------------------------

export const hopTable = "CREATE TABLE IF NOT EXISTS bench_hop (run TEXT NOT NULL, i INTEGER NOT NULL, ms REAL NOT NULL, PRIMARY KEY (run, i))"

/** Sends one hop message (its send under the profile: the caller passes the profiled queue), stamped before the send. */
export const sendHop = (queue: Queue, run: string, i: number) => queue.send({ run, i, sent_at: Date.now() }, { contentType: "json" })

/** The hop's consumer: notes each message's time from before its send to now. */
export const consumeHop = async (batch: MessageBatch<{ run: string; i: number; sent_at: number }>, db: D1Database) => {
  const now = Date.now()
  await db.batch(batch.messages.map((m) => db.prepare("INSERT OR IGNORE INTO bench_hop (run, i, ms) VALUES (?, ?, ?)").bind(m.body.run, m.body.i, now - m.body.sent_at)))
  batch.ackAll()
}

export const hops = async (db: D1Database, run: string) =>
  (await db.prepare("SELECT ms FROM bench_hop WHERE run = ? ORDER BY i").bind(run).all<{ ms: number }>()).results.map((r) => r.ms)
