/** The Worker under test: the example's modules plus test-only handlers. */
import type { WorkflowEvent, WorkflowStep } from "cloudflare:workers"
import { FactlineWorkflow as PlatformWorkflow, makePlatform } from "@factline/workers"
import { modules } from "../src/modules.js"
import * as Drain from "./Drain.js"
import * as HandlerFaults from "./HandlerFaults.js"
import { testModule } from "./TestModule.js"
import * as WorkflowFaults from "./WorkflowFaults.js"

export { EndpointLimiter, LedgerShard } from "@factline/workers"

/** The platform's workflow entrypoint; while the chaos run's workflows case installs faults, on faulty bindings and steps (WorkflowFaults.ts). */
export class FactlineWorkflow extends PlatformWorkflow {
  #own: object | undefined
  override run(event: Readonly<WorkflowEvent<unknown>>, step: WorkflowStep): Promise<unknown> {
    this.#own ??= this.env
    ;(this as unknown as { env: object }).env = WorkflowFaults.envOf(this.#own)
    return super.run(event, WorkflowFaults.stepOf(step, event.instanceId))
  }
}

/**
 * The example's modules with its CRM sync narrowed to the calls of the tests about it (subjects `crm-…`, `wf-…`,
 * `wfc_…`): the other tests' hundreds of qualified calls would each start an instance that calls the CRM and
 * appends a fact seconds after their drain() returned. The workflow itself is the example's, unchanged.
 */
const testModules = modules.map((m) => m.name !== "crm" ? m : {
  ...m,
  workflows: m.workflows.map((w) => ({ ...w, when: (fact: Parameters<typeof w.when>[0]) => /^(crm-|wf-|wfc_)/.test(fact.stream) && w.when(fact) }))
})

export const platform = makePlatform([...testModules, testModule])

/**
 * Settings a test lays over the Worker's env for every HTTP request and queue batch the Worker handles until it
 * clears them (the queue-groups test runs the app with FACTLINE_QUEUE_GROUPS=4, the groups wrangler.jsonc declares,
 * where vitest.config.ts binds 1). The test runner and the Worker share this module. One env object per setting,
 * so the platform keeps one runtime for it. A LedgerShard keeps the Worker's own env.
 */
let overrides: { readonly vars: Readonly<Record<string, string>>; readonly envs: WeakMap<object, object> } | undefined
export const overrideSettings = (vars: Readonly<Record<string, string>> | undefined) => {
  overrides = vars === undefined ? undefined : { vars, envs: new WeakMap() }
}
const withOverrides = <E extends object>(env: E): E => {
  if (overrides === undefined) return env
  let overridden = overrides.envs.get(env)
  if (overridden === undefined) overrides.envs.set(env, overridden = { ...env, ...overrides.vars })
  return overridden as E
}

/**
 * Holds the consumer of one queue (a test builds a real backlog on the local broker, which runs one batch per
 * queue at a time: what is sent while its batch is held waits in the queue). Until `release()`, every batch of
 * `queue` waits; from then on until `end()` its batches are acked unprocessed (a test's filler) or, with
 * `process`, handed to the platform as usual (the test drains the backlog in between).
 */
const held = new Map<string, { readonly until: Promise<void>; batches: number; readonly process: boolean }>()
export const holdQueue = (queue: string, options: { readonly process?: boolean } = {}) => {
  let release!: () => void
  const hold = { until: new Promise<void>((resolve) => (release = resolve)), batches: 0, process: options.process === true }
  held.set(queue, hold)
  return {
    release: () => release(),
    end: () => void held.delete(queue),
    batchesHeld: () => hold.batches
  }
}

// The runtime's entry: its queue handler also settles the messages `drain()` counts (tests call `platform.queue` directly).
// While the chaos run's erasure case installs faults, requests and batches run on faulty bindings (HandlerFaults.ts).
export default {
  ...platform,
  fetch: (request, env, ctx) => platform.fetch(request, HandlerFaults.envOf(withOverrides(env)), ctx),
  queue: Drain.consumer(async (batch, env, ctx) => {
    const hold = held.get(batch.queue)
    if (hold === undefined) return platform.queue(batch, HandlerFaults.envOf(withOverrides(env)), ctx)
    hold.batches++
    await hold.until
    if (hold.process) return platform.queue(batch, HandlerFaults.envOf(withOverrides(env)), ctx)
    batch.ackAll()
  })
} satisfies Pick<typeof platform, "fetch" | "queue" | "scheduled">
