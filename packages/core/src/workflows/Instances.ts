/**
 * Workflow instances from the fact-processing consumer's side: which instances a batch of facts starts and
 * which waiting instances it wakes, and the instance ids and params that join the two.
 *
 * An instance is one per (tenant, workflow, subject): its id is the workflow's name and a hash of the three
 * (`instanceId`; Cloudflare's ids are at most 100 characters of `[a-zA-Z0-9_-]`), so a redelivered or
 * repeated start fact finds the instance it started (`exists`) and a fact on the same subject finds the
 * instance waiting for it. A start costs the consumer one binding call and no D1 write (the instance records
 * itself in `workflow_instances` when it first runs: Runner.ts), so a batch of facts costs the same D1 round
 * trips with or without workflows; a fact a workflow waits for is sent to its instance as an event named by the wait. An
 * instance that does not exist (yet, or any more) is not an error: the workflow reads its stream before it
 * waits. A binding that fails is the fact's transient failure: the message is retried, and every step of
 * this is idempotent.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { Fact } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import * as FactId from "../ledger/FactId.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import { Registry } from "../registry/Registry.js"
import { Workflows } from "../platform/Workflows.js"
import { WorkflowRecords } from "./WorkflowRecords.js"

/** The instance of `workflow` for a tenant's subject: `<workflow>-<32 hex>` (dots in the name become `_`). */
export const instanceId = async (workflow: string, tenantId: string, subject: string): Promise<string> =>
  `${workflow.replaceAll(".", "_")}-${await FactId.digest([tenantId, workflow, subject])}`

/** Start facts above this size travel as their id (the instance reads the fact from the ledger): seed 002's pointer. */
export const inlineFactBytes = 64 * 1024

/** An instance's params: which workflow, whose, and the fact that started it (inline, or its id when large). */
export const Params = Schema.Struct({
  workflow: Schema.String,
  tenant_id: Schema.String,
  stream: Schema.String,
  instance_id: Schema.String,
  fact_id: Schema.String,
  fact: Schema.optional(Fact),
  traceparent: Schema.optional(Schema.String)
})
export type Params = typeof Params.Type

/** The event a waiting instance receives: the fact, under the wait's name. */
export const eventType = (wait: string) => `wait-${wait}`

/** The event that wakes an instance whose sleep or wait is overdue (no wait listens for it: it only wakes the instance). */
export const wakeType = "factline-wake"

/**
 * How long past its time an instance may still be sleeping or waiting before the watchdog wakes it, by default
 * (`FACTLINE_WORKFLOW_OVERDUE_SECONDS`, Settings.workflowOverdueMs).
 */
export const overdueAfterSeconds = 60

/**
 * The watchdog (each scheduled run): instances whose sleep or wait ended more than `overdueAfterMs` ago but
 * that still say sleeping or waiting get an event, which wakes an instance Cloudflare has not resumed (local
 * Workflows do not resume a sleeping instance after a restart of `wrangler dev` until an event reaches it); an
 * instance that is running meanwhile ignores it. Returns how many were woken.
 */
export const wakeOverdue = Effect.fn("Workflows.wakeOverdue")(function*(overdueAfterMs = overdueAfterSeconds * 1000, limit = 100) {
  const records = yield* WorkflowRecords
  const workflows = yield* Workflows
  const now = yield* Clock.currentTimeMillis
  const overdue = yield* records.overdue(new Date(now - overdueAfterMs).toISOString(), limit)
  let woken = 0
  for (const instance of overdue) {
    const delivered = yield* Effect.result(workflows.deliver(instance.instance_id, { type: wakeType, payload: null }))
    if (Result.isSuccess(delivered) && delivered.success === "delivered") woken++
  }
  return woken
})

/**
 * Starts the instances the facts start and delivers the facts instances wait for. Returns the facts (by key)
 * that failed: each one's message is retried.
 */
export const dispatch = Effect.fn("Workflows.dispatch")(function*(items: ReadonlyArray<{ readonly key: string; readonly fact: Fact }>) {
  const registry = yield* Registry
  const failed = new Map<string, Failure.Unavailable>()
  // Most facts start and wake nothing: they cost a lookup by type, nothing more.
  const relevant = items.filter(({ fact }) => registry.workflowsStartedBy(fact.type).length > 0 || registry.workflowWaitsFor(fact.type).length > 0)
  if (relevant.length === 0) return failed
  // `when` sees personal fields opened; the instance gets the fact as stored (sealed): its run opens it (Runner).
  const opened = registry.hasPersonalData ? yield* Effect.result(Sealing.openFacts(yield* KeyRing, registry.personalFact, relevant.map((r) => r.fact))) : undefined
  if (opened !== undefined && Result.isFailure(opened)) {
    for (const { key } of relevant) failed.set(key, opened.failure)
    return failed
  }
  const work = relevant.flatMap(({ key, fact }, index) => {
    // Workflows see a fact in its type's latest shape (one newer than the code fails its message elsewhere).
    const current = registry.latest(opened === undefined ? fact : opened.success[index]!)
    if (Result.isFailure(current)) return []
    const plain = current.success
    return [
      ...registry.workflowsStartedBy(fact.type).filter((w) => w.when(plain)).map((workflow) => ({ key, fact, workflow, wait: undefined as string | undefined })),
      ...registry.workflowWaitsFor(fact.type).map(({ workflow, wait }) => ({ key, fact, workflow, wait: wait as string | undefined }))
    ]
  })
  if (work.length === 0) return failed
  const workflows = yield* Workflows
  const resolved = yield* Effect.promise(() => Promise.all(work.map(async (w) => ({ ...w, id: await instanceId(w.workflow.name, w.fact.tenant_id, w.fact.stream) }))))
  yield* Effect.forEach(resolved, ({ key, fact, workflow, wait, id }) => {
    if (failed.has(key)) return Effect.void
    const made = wait === undefined
      ? workflows.start(id, {
        workflow: workflow.name, tenant_id: fact.tenant_id, stream: fact.stream, instance_id: id, fact_id: fact.fact_id,
        ...(JSON.stringify(fact).length <= inlineFactBytes ? { fact } : {}),
        ...(fact.traceparent === undefined ? {} : { traceparent: fact.traceparent })
      } satisfies Params)
      : workflows.deliver(id, { type: eventType(wait), payload: fact })
    return Effect.catch(Effect.asVoid(made), (error) => Effect.sync(() => void failed.set(key, error)))
  }, { concurrency: 8, discard: true })
  return failed
})
