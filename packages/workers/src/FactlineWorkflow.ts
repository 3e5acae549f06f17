/**
 * `FactlineWorkflow`: the Cloudflare Workflows entrypoint that runs every module's workflows (one `workflows`
 * binding, `FACTLINE_WORKFLOWS`; an instance's params name its workflow). Export it from the Worker's entry
 * beside LedgerShard; `makePlatform(modules)` gives it the registry (it runs on the same isolate runtime as the
 * Worker's requests and batches).
 *
 * Each invocation runs core's `WorkflowRunner.run` over Cloudflare's `step`; a workflow that failed for good
 * (its compensations done) or could not run (unknown workflow, bad params) fails the instance with a
 * `NonRetryableError`, so Cloudflare shows it errored and does not retry the whole body.
 */
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers"
import { NonRetryableError } from "cloudflare:workflows"
import * as Effect from "effect/Effect"
import { Settings, type WorkflowEngine, WorkflowRunner } from "@factline/core/runtime"
import type { PlatformEnv } from "./Env.js"
import type { PlatformRuntime } from "./Services.js"

let current: ((env: PlatformEnv) => PlatformRuntime) | undefined

/** Called by `makePlatform`: the runtime instances run on. */
export const install = (runtime: (env: PlatformEnv) => PlatformRuntime) => {
  current = runtime
}

export class FactlineWorkflow extends WorkflowEntrypoint<PlatformEnv, unknown> {
  override async run(event: Readonly<WorkflowEvent<unknown>>, step: WorkflowStep): Promise<unknown> {
    if (current === undefined) throw new NonRetryableError("FactlineWorkflow: no platform was made in this Worker (export default makePlatform(modules) from its entry)")
    const steps: WorkflowEngine.Step = {
      do: (name, config, callback) => step.do(name, config, callback as () => Promise<any>),
      sleep: (name, duration) => step.sleep(name, duration),
      waitForEvent: (name, options) => step.waitForEvent(name, options) as Promise<any>
    }
    // Step retry delays follow FACTLINE_RETRY_DELAY_SCALE, as queue retries do.
    const ended = await current(this.env).runPromise(Effect.flatMap(Settings.Settings, (settings) => WorkflowRunner.run(event.payload, steps, settings.retryDelayScale)))
    if (ended._tag === "Completed") return { status: "complete" }
    // `WorkflowFailed` (the body failed for good) or `WorkflowRefused` (it could not run).
    throw new NonRetryableError(ended.message, `Workflow${ended._tag}`)
  }
}
