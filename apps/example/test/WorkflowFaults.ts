/**
 * Faults inside running workflow instances, for the chaos run's workflows case (test/chaos/workflows.chaos.test.ts).
 * While `install(options)` is in force, every invocation of the test Worker's `FactlineWorkflow` (test/worker.ts)
 * runs with faulty bindings — `Faults.env` on the schedule: D1 (the instance's row, its dead letter), the
 * LedgerShard namespace (its appends and reads) and the platform queues (the relay of what it appends) — and a
 * step whose attempts die at random: before their work (`refused`) or after it, the result lost (`lost`: the
 * engine retries an attempt whose work was done). At most `maxPerStep` attempts of one step of one instance die
 * this way, so a step gets through within its retries (the faults are transient, as the other stage cases' are).
 *
 * Nothing in the runtime knows: the Worker's entrypoint swaps its own env and step before calling the platform's
 * (a module shared by the test runner and the Worker, as Drain.ts and `overrideSettings` are). Per test file:
 * each file's Worker has its own module state and its own Workflows instances.
 */
import type { WorkflowStep } from "cloudflare:workers"
import * as Faults from "./faults.js"

export interface Options {
  /** The bindings' schedule inside the instances. */
  readonly schedule: Faults.Schedule
  /** The chance that an attempt of a step dies (half before its work, half after it with the result lost). */
  readonly stepFailRate: number
  /** At most this many dying attempts per step of an instance. */
  readonly maxPerStep: number
}

/** What the faults did inside the instances. */
export interface Counts {
  readonly bindings: Faults.Injected
  readonly steps: { attempts: number; refused: number; lost: number }
  /** Invocations of the entrypoint while installed (an instance's first run, and every replay). */
  invocations: number
}

let installed: { readonly options: Options; readonly counts: Counts; readonly envs: WeakMap<object, object>; readonly died: Map<string, number> } | undefined

export const install = (options: Options): Counts => {
  const counts: Counts = { bindings: Faults.newInjected(), steps: { attempts: 0, refused: 0, lost: 0 }, invocations: 0 }
  installed = { options, counts, envs: new WeakMap(), died: new Map() }
  return counts
}

export const uninstall = () => {
  installed = undefined
}

/** The env an invocation runs with: the faulty copy of `env` (one object per env, so the platform keeps one runtime for it). */
export const envOf = <E extends object>(env: E): E => {
  if (installed === undefined) return env
  installed.counts.invocations++
  let faulty = installed.envs.get(env)
  if (faulty === undefined) installed.envs.set(env, faulty = Faults.env(env as unknown as Record<string, unknown>, installed.options.schedule, installed.counts.bindings).env)
  return faulty as E
}

/** The step an invocation of `instanceId` runs on: its `do` attempts die at random (its sleeps and waits are Cloudflare's). */
export const stepOf = (step: WorkflowStep, instanceId: string): WorkflowStep => {
  const current = installed
  if (current === undefined) return step
  const attempt = (name: string, callback: () => Promise<unknown>) => async () => {
    const key = `${instanceId}|${name}`
    const died = current.died.get(key) ?? 0
    current.counts.steps.attempts++
    const dies = died < current.options.maxPerStep && Math.random() < current.options.stepFailRate
    if (!dies) return callback()
    current.died.set(key, died + 1)
    if (Math.random() < 0.5) {
      current.counts.steps.refused++
      throw new Error(`injected fault: an attempt of step ${name} died before its work`)
    }
    await callback()
    current.counts.steps.lost++
    throw new Error(`injected fault: an attempt of step ${name} did its work, then its result was lost`)
  }
  return {
    do: ((name: string, configOrCallback: unknown, maybeCallback?: () => Promise<unknown>) =>
      maybeCallback === undefined
        ? step.do(name, attempt(name, configOrCallback as () => Promise<never>) as () => Promise<never>)
        : step.do(name, configOrCallback as never, attempt(name, maybeCallback) as () => Promise<never>)) as WorkflowStep["do"],
    sleep: (name, duration) => step.sleep(name, duration),
    sleepUntil: (name, timestamp) => step.sleepUntil(name, timestamp),
    waitForEvent: (name, options) => step.waitForEvent(name, options)
  } as WorkflowStep
}
