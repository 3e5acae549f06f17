/**
 * Cloudflare Workflows' one door: the platform starts instances, delivers facts to waiting ones, reads their
 * status and terminates or restarts them through `Workflows`, over the `workflows` binding (one binding, class
 * `FactlineWorkflow`, runs every module's workflows: the instance's params name which). Starting is idempotent
 * (an instance id that exists is `exists`, never a second instance); delivering to an id with no instance is
 * `missing` (the fact came before the instance, or after it ended: the workflow reads the stream before it
 * waits, so nothing is lost). An operator's terminate or restart that Cloudflare refuses for the instance's
 * state (`instance.cannot_terminate`: it has ended; `instance.cannot_restart`) is a `Conflict` naming why. Any
 * other failure of the binding is `Unavailable` (retried by the caller's queue). No binding (a platform without
 * workflows) is `Unavailable` too, naming the wrangler entry to add.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Failure from "../failures/Failure.js"

/** What Cloudflare says of an instance (`instance.status()`). */
export interface InstanceStatus {
  readonly status: string
  readonly error?: unknown
  readonly output?: unknown
}

/** The part of a Cloudflare `WorkflowInstance` the door uses. */
export interface InstanceHandle {
  readonly id: string
  readonly status: () => Promise<InstanceStatus>
  readonly sendEvent: (event: { readonly type: string; readonly payload: unknown }) => Promise<void>
  readonly terminate: () => Promise<void>
  readonly restart: () => Promise<void>
}

/** The part of a Cloudflare `Workflow` binding the door uses. */
export interface WorkflowBinding {
  readonly create: (options: { readonly id: string; readonly params: unknown }) => Promise<{ readonly id: string }>
  readonly get: (id: string) => Promise<InstanceHandle>
}

export const bindingName = "FACTLINE_WORKFLOWS"

const text = (error: unknown) => (error instanceof Error ? error.message : String(error))
const exists = (error: unknown) => /already.?exists|already_exists|duplicate/i.test(text(error))
const missing = (error: unknown) => /not.?found|not_found|does not exist|no such instance/i.test(text(error))
/** Cloudflare refusing an operation for the instance's state: `instance.cannot_terminate`, `instance.cannot_restart`. */
const refused = (error: unknown) => /cannot_terminate|cannot_restart/i.test(text(error))

export class Workflows extends Context.Service<Workflows, {
  readonly start: (id: string, params: unknown) => Effect.Effect<"started" | "exists", Failure.Unavailable>
  readonly deliver: (id: string, event: { readonly type: string; readonly payload: unknown }) => Effect.Effect<"delivered" | "missing", Failure.Unavailable>
  readonly status: (id: string) => Effect.Effect<Option.Option<InstanceStatus>, Failure.Unavailable>
  readonly terminate: (id: string) => Effect.Effect<"terminated" | "missing", Failure.Unavailable | Failure.Conflict>
  readonly restart: (id: string) => Effect.Effect<"restarted" | "missing", Failure.Unavailable | Failure.Conflict>
}>()("@factline/core/Workflows") {
  static readonly layer = (binding: WorkflowBinding | undefined) => Layer.succeed(Workflows, make(binding))
}

export const make = (binding: WorkflowBinding | undefined): Workflows["Service"] => {
  const unavailable = (error: unknown) => new Failure.Unavailable({ service: "workflows", message: text(error) })
  const call = <A>(what: string, f: (binding: WorkflowBinding) => Promise<A>): Effect.Effect<A, unknown> =>
    binding === undefined
      ? Effect.fail(new Error(`${what}: the ${bindingName} binding is not configured (add a "workflows" entry with binding ${bindingName}, class_name FactlineWorkflow to the wrangler config)`))
      : Effect.tryPromise({ try: () => f(binding), catch: (error) => error })
  const onInstance = <A>(what: string, id: string, f: (instance: InstanceHandle) => Promise<A>) =>
    call(what, async (b) => f(await b.get(id)))
  const orMissing = <A, B>(effect: Effect.Effect<A, unknown>, none: B) =>
    Effect.catch(effect, (error) => (missing(error) ? Effect.succeed(none) : Effect.fail(unavailable(error))))
  const operated = <A, B>(what: string, id: string, effect: Effect.Effect<A, unknown>, none: B): Effect.Effect<A | B, Failure.Unavailable | Failure.Conflict> =>
    Effect.catch(effect, (error): Effect.Effect<B, Failure.Unavailable | Failure.Conflict> =>
      missing(error)
        ? Effect.succeed(none)
        : refused(error)
        ? Effect.fail(new Failure.Conflict({ code: "workflow_refused", message: `Cloudflare refused to ${what} workflow instance ${id}: ${text(error)}` }))
        : Effect.fail(unavailable(error)))
  return {
    start: (id, params) =>
      call("start", (b) => b.create({ id, params })).pipe(
        Effect.as("started" as const),
        Effect.catch((error) => (exists(error) ? Effect.succeed("exists" as const) : Effect.fail(unavailable(error))))
      ),
    deliver: (id, event) => orMissing(Effect.as(onInstance("deliver", id, (i) => i.sendEvent(event)), "delivered" as const), "missing" as const),
    status: (id) => orMissing(Effect.map(onInstance("status", id, (i) => i.status()), Option.some), Option.none()),
    terminate: (id) => operated("terminate", id, Effect.as(onInstance("terminate", id, (i) => i.terminate()), "terminated" as const), "missing" as const),
    restart: (id) => operated("restart", id, Effect.as(onInstance("restart", id, (i) => i.restart()), "restarted" as const), "missing" as const)
  }
}
