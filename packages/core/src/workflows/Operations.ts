/**
 * The operators' use cases over workflow instances (`GET /v1/workflows`, `GET /v1/workflows/:id`, `POST
 * /v1/workflows/:id/terminate|retry`, `factline workflows …`): the index of instances (`WorkflowRecords`, the
 * only list there is: Cloudflare's binding has none) joined with what Cloudflare says of one (`Workflows`
 * door) and the facts it appended (the ledger).
 *
 * Scoped like runs: a tenant's admin reaches its own instances, the platform scope every tenant's; another
 * tenant's instance is not found, as an unknown one is. Terminate stops the instance at Cloudflare first and
 * then records `terminated` (an instance Cloudflare refuses to stop — it has ended — is a 409 and the row is
 * left as it is). Retry records a new run (`queued`, `WorkflowRecords.restarted`) first and then restarts it
 * (Cloudflare's `restart()`: every step runs again, each with its idempotency key, so nothing done is done
 * twice); a restart that fails puts the row back. A complete instance is not retried.
 *
 * It does not run instances (Runner.ts) nor start them (Instances.ts).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type { Fact } from "@factline/schemas"
import type { InstanceDetail } from "../api/Workflows.js"
import { shownFacts } from "../api/Workflows.js"
import { listedFact } from "../batch/Export.js"
import * as Failure from "../failures/Failure.js"
import { Ledger } from "../ledger/Ledger.js"
import { type InstanceStatus, Workflows } from "../platform/Workflows.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import { Registry } from "../registry/Registry.js"
import { type Filters, type Instance, type Scope, WorkflowRecords } from "./WorkflowRecords.js"

export type { Filters, Scope } from "./WorkflowRecords.js"

/** An instance as `GET /v1/workflows/:id` answers it. */
export type Detail = typeof InstanceDetail.Type

/** Cloudflare's error of an instance (`{ name, message }` from its binding) as one line. */
const errorText = (error: unknown): string | null => {
  if (error === undefined || error === null) return null
  if (typeof error === "object" && "message" in error) {
    const { name, message } = error as { readonly name?: unknown; readonly message?: unknown }
    return typeof name === "string" && name !== "" && name !== "Error" ? `${name}: ${String(message)}` : String(message)
  }
  return typeof error === "string" ? error : JSON.stringify(error)
}

const cloudflareOf = (status: InstanceStatus): NonNullable<Detail["cloudflare"]> => ({
  status: status.status,
  error: errorText(status.error),
  ...(status.output === undefined || status.output === null ? {} : { output: status.output })
})

/** The facts the instance appended (the first `shownFacts` of its ids), from the ledger, in stream order and latest shape. */
const appendedFacts = (row: Instance) =>
  Effect.gen(function*() {
    const ledger = yield* Ledger
    const registry = yield* Registry
    const found = yield* Effect.forEach(row.facts.slice(0, shownFacts), (factId) => ledger.findFact(row.tenant_id, factId), { concurrency: 8 }).pipe(
      Effect.mapError((error) => new Failure.Unavailable({ service: "the ledger", message: error.message }))
    )
    const stored = found.filter((fact): fact is Fact => fact !== null)
    const opened = registry.hasPersonalData ? yield* Sealing.openFacts(yield* KeyRing, registry.personalFact, stored) : stored
    return opened
      .map((fact) => {
        const current = registry.latest(fact)
        return listedFact(Result.isSuccess(current) ? current.success : fact)
      })
      .sort((a, b) => a.sequence - b.sequence)
  })

const detailOf = (row: Instance) =>
  Effect.gen(function*() {
    const status = yield* (yield* Workflows).status(row.instance_id)
    const appended = yield* appendedFacts(row)
    return { ...row, cloudflare: Option.isSome(status) ? cloudflareOf(status.value) : null, appended } satisfies Detail
  })

const unknownToCloudflare = (id: string) => new Failure.NotFound({ message: `workflow instance ${id} is recorded, but Cloudflare does not know it (not created yet, or gone)` })

/** A page of instances, the most recently updated first. */
export const list = Effect.fn("WorkflowOperations.list")(function*(scope: Scope, filters: Filters, page: { readonly limit: number; readonly cursor?: string }) {
  return yield* (yield* WorkflowRecords).list(scope, filters, page)
})

/** One instance with Cloudflare's status and the facts it appended. */
export const show = Effect.fn("WorkflowOperations.show")(function*(scope: Scope, id: string) {
  return yield* detailOf(yield* (yield* WorkflowRecords).get(scope, id))
})

/** Stops the instance at Cloudflare, then records it `terminated`. */
export const terminate = Effect.fn("WorkflowOperations.terminate")(function*(scope: Scope, id: string) {
  const records = yield* WorkflowRecords
  const row = yield* records.get(scope, id)
  const done = yield* (yield* Workflows).terminate(id)
  if (done === "missing") return yield* unknownToCloudflare(id)
  yield* records.move(row.tenant_id, id, { status: "terminated", waiting_for: null, wait_until: null })
  return yield* detailOf(yield* records.get(scope, id))
})

/** Records the instance `queued` and restarts it at Cloudflare (not a complete one). */
export const retry = Effect.fn("WorkflowOperations.retry")(function*(scope: Scope, id: string) {
  const records = yield* WorkflowRecords
  const workflows = yield* Workflows
  const row = yield* records.get(scope, id)
  const status = yield* workflows.status(id)
  if (Option.isNone(status)) return yield* unknownToCloudflare(id)
  if (status.value.status === "complete") {
    return yield* new Failure.Conflict({ code: "workflow_complete", message: `workflow instance ${id} completed: there is nothing to retry` })
  }
  // Queued before the restart (a new run: error, step and attempts cleared, started now): the restarted run
  // moves the row on, and must not be overwritten by this.
  yield* records.restarted(row.tenant_id, id)
  const done = yield* workflows.restart(id).pipe(
    Effect.tapError(() => Effect.ignore(records.move(row.tenant_id, id, { status: row.status, step: row.step, error: row.error, waiting_for: row.waiting_for, wait_until: row.wait_until })))
  )
  if (done === "missing") return yield* unknownToCloudflare(id)
  return yield* detailOf(yield* records.get(scope, id))
})
