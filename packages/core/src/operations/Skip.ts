/**
 * Giving a dead letter up (`POST /v1/dlq/:id/skip`): the record is marked `skipped` (only an open one, so two
 * skips skip once) and the decision goes into the ledger — a platform-owned `reconciliation` fact in the
 * original message's stream naming who and why, with the message's trace — and is relayed like any fact
 * (projections, webhooks). The three belong together: when the fact cannot be appended, or neither sent nor
 * handed to its shard's outbox, the record is opened again and the skip fails, so it can simply be retried
 * (the fact's id comes from the dead letter's: a fact that did land is found, not appended twice, and relayed).
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { TraceContext } from "@factline/schemas"
import type * as Consumer from "../consuming/Consumer.js"
import * as PlatformFacts from "../definitions/PlatformFacts.js"
import * as FactId from "../ledger/FactId.js"
import { Ledger } from "../ledger/Ledger.js"
import { relayFor } from "../relay/FactRelay.js"
import { type Detail, DeadLetterStore, type Scope } from "./DeadLetterStore.js"
import * as Failure from "../failures/Failure.js"
import * as Time from "../platform/Time.js"

/** The record was not skipped (it is open again): its reconciliation fact could not be appended or relayed. Retryable. */
export class SkipIncomplete extends Schema.TaggedError<SkipIncomplete>()("SkipIncomplete", { message: Schema.String }) implements Failure.Failure {
  readonly [Failure.TypeId] = Failure.TypeId
  get status() { return 503 }
  get code() { return "unavailable" }
  get retryable() { return true }
  get reason() { return "retries_exhausted" as const }
  get publicMessage() { return `${this.message}: the record was not skipped (it is open again); retry the skip` }
}

/** Skips an open dead letter and appends its reconciliation fact; `tenantId` is the caller's, for records without one. */
export const skip = Effect.fn("DeadLetterSkip.skip")(function*(scope: Scope, id: string, reason: string, tenantId: string) {
  const store = yield* DeadLetterStore
  const record: Detail = yield* store.resolve(scope, id, "skipped", reason)
  const tenant = record.tenant_id ?? tenantId
  const fact_id = yield* Effect.promise(() => FactId.make({ tenantId: tenant, cause: `dlq:${record.id}`, decidedBy: "factline-operations", position: 0 }))
  const ledger = yield* Ledger
  const appended = yield* Effect.result(ledger.append([{
    tenant_id: tenant,
    stream: record.subject ?? `dead-letters/${record.id}`,
    facts: [{
      fact_id,
      type: PlatformFacts.Reconciliation.type,
      data: {
        action: "dead_letter_skipped", dead_letter_id: record.id, queue: record.queue, failure_reason: record.reason,
        idempotency_key: record.idempotency_key, message_type: record.message_type, note: reason, by: scope.actor
      },
      causation_id: record.idempotency_key ?? record.id,
      correlation_id: record.idempotency_key ?? record.id,
      caused_by: "factline-operations",
      created_at: yield* Time.now,
      // The dead-lettered message's trace (a new parent-id: the operator's decision), or a new trace.
      traceparent: TraceContext.child((record.original_message as { readonly traceparent?: string } | null)?.traceparent)
    }]
  }]))
  const outcome = Result.isSuccess(appended) ? appended.success[0] : undefined
  const facts = outcome?.status === "appended" || outcome?.status === "duplicate" ? outcome.facts : undefined
  let problem = Result.isFailure(appended)
    ? `the reconciliation fact could not be appended: ${appended.failure.message}`
    : facts === undefined ? `the reconciliation fact could not be appended: ${outcome && "message" in outcome ? outcome.message : outcome?.status}` : undefined
  if (facts !== undefined) {
    const unrelayed = new Map<string, Consumer.Outcome>()
    yield* relayFor(new Map([[record.id, facts]]), unrelayed)
    if (unrelayed.size > 0) problem = "the reconciliation fact could not be relayed"
  }
  if (problem !== undefined) {
    yield* store.reopen(scope, record.id, problem)
    return yield* new SkipIncomplete({ message: problem })
  }
  return { ...record, reconciliation_fact_id: fact_id }
})
