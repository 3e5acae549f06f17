/**
 * The consumer of `factline-fact-processing`: facts in, derived facts appended.
 *
 * For each fact, every processor registered for its type runs; the facts
 * they derive get ids from (parent fact id, processor, position) and are
 * appended to the parent's stream as one group — one ledger RPC per shard
 * for the batch — and relayed once for the batch, like the events consumer's.
 * Derived facts inherit the parent's trace (same trace-id, a new parent-id).
 * Timer requests a processor returns are recorded as `timer_scheduled` /
 * `timer_cancelled` facts among the derived ones (`after` counts from the
 * parent fact's `created_at`).
 * No inbox: a redelivered fact derives the same ids, which the ledger already
 * holds. Replayed facts (from a rebuild) are acknowledged without running
 * anything: a rebuild never re-triggers processors. A processor runs with its
 * module's services (`Registry.runDeclared`); a throw in it is a defect.
 * Processors see the fact in its type's latest shape (Registry.latest); one
 * newer than the code is a permanent failure naming its type and version.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import { type Fact, type FactPayload, TraceContext } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as Failure from "../failures/Failure.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as FactId from "../ledger/FactId.js"
import { Ledger } from "../ledger/Ledger.js"
import type { AppendGroup, FactDraft } from "../ledger/LedgerProtocol.js"
import * as FactMessage from "../relay/FactMessage.js"
import * as ProcessorState from "./ProcessorState.js"
import { relayFor } from "../relay/FactRelay.js"
import { Registry, runDeclared } from "../registry/Registry.js"
import * as Timer from "../definitions/Timer.js"
import * as Telemetry from "../platform/Telemetry.js"
import * as WorkflowInstances from "../workflows/Instances.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"

const isFailed = (outcome: Consumer.Outcome | undefined) => outcome !== undefined && Result.isFailure(outcome)

export const process = Effect.fn("ProcessingConsumer.process")(function*(items: ReadonlyArray<{ readonly key: string; readonly value: FactPayload }>) {
  const registry = yield* Registry
  const ledger = yield* Ledger
  const outcomes = new Map<string, Consumer.Outcome>()
  const groups: Array<{ key: string; group: AppendGroup }> = []
  const now = new Date(yield* Clock.currentTimeMillis).toISOString()
  const sender = yield* Telemetry.sender
  // Processors see personal fields opened (one key ring call for the batch); the facts relayed and handed to workflows stay sealed.
  const opened = registry.hasPersonalData ? yield* Effect.result(Sealing.openFacts(yield* KeyRing, registry.personalFact, items.map((i) => i.value.fact))) : undefined
  if (opened !== undefined && Result.isFailure(opened)) {
    for (const { key } of items) outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: opened.failure.message })))
    return outcomes as ReadonlyMap<string, Consumer.Outcome>
  }
  yield* Effect.forEach(items, ({ key, value }, index) =>
    Effect.gen(function*() {
      const { replayed } = value
      const processors = replayed ? [] : registry.processorsFor(value.fact.type)
      const plain = opened === undefined ? value.fact : opened.success[index]!
      const current = processors.length === 0 ? Result.succeed(plain) : registry.latest(plain)
      if (Result.isFailure(current)) return void outcomes.set(key, Consumer.failed(current.failure))
      const fact = current.success
      const drafts: Array<FactDraft> = []
      for (const processor of processors) {
        // A throw is a defect of this fact only; an undeclared or invalid derived fact fails it permanently.
        const exit = yield* Effect.exit(runDeclared(processor, () => ProcessorState.run(processor, fact)))
        if (Exit.isFailure(exit)) return void outcomes.set(key, Consumer.failed(Failure.classify(exit.cause)))
        // The parent's trace, one new parent-id per (parent, processor) — W3C's way; the processing span's when exported.
        const traceparent = sender(fact.traceparent) ?? TraceContext.child(fact.traceparent)
        const derived = yield* Effect.promise(() =>
          Promise.all(exit.value.map((d) => Timer.record(d, fact.created_at)).map(async (d, position): Promise<FactDraft> => ({
            fact_id: await FactId.make({ tenantId: fact.tenant_id, cause: fact.fact_id, decidedBy: processor.name, position }),
            type: d.type,
            data: d.data as Record<string, unknown>,
            ...(d.schema_version === undefined ? {} : { schema_version: d.schema_version }),
            causation_id: fact.fact_id,
            correlation_id: fact.correlation_id,
            caused_by: processor.name,
            created_at: now,
            traceparent
          })))
        )
        drafts.push(...derived)
      }
      if (drafts.length === 0) return void outcomes.set(key, Consumer.done)
      groups.push({ key, group: { tenant_id: fact.tenant_id, stream: fact.stream, facts: drafts } })
    }), { concurrency: "unbounded", discard: true })

  const toRelay = new Map<string, ReadonlyArray<Fact>>()
  if (groups.length > 0) {
    const appended = yield* Effect.result(ledger.append(groups.map((g) => g.group)))
    groups.forEach(({ key }, i) => {
      if (Result.isFailure(appended)) return void outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: appended.failure.message })))
      const result = appended.success[i]!
      if (result.status === "unavailable") return void outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: result.message })))
      if (result.status === "idempotency_conflict") return void outcomes.set(key, Consumer.failed(new Failure.PermanentError({ reason: "idempotency_conflict", message: result.message })))
      if (result.status === "version_conflict") return void outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: "unexpected version conflict" })))
      outcomes.set(key, Consumer.done)
      toRelay.set(key, result.facts)
    })
  }
  yield* relayFor(toRelay, outcomes)
  // The workflows these facts start, and the waiting instances they wake (a failure retries the fact: both are idempotent).
  const started = registry.workflows.size === 0 ? new Map() : yield* WorkflowInstances.dispatch(items.filter(({ key, value }) => !value.replayed && !isFailed(outcomes.get(key))).map(({ key, value }) => ({ key, fact: value.fact })))
  for (const [key, error] of started) outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: `workflows: ${error.message}` })))
  return outcomes as ReadonlyMap<string, Consumer.Outcome>
})

export const consume = Effect.fn("ProcessingConsumer.consume")(function*(batch: MessageBatch<unknown>, options: Consumer.Options = {}) {
  return yield* Consumer.run({
    policy: RetryPolicy.factProcessing,
    decode: FactMessage.decode,
    isolate: FactMessage.isolate,
    process,
    delayScale: options.delayScale, log: options.log, runs: options.runs
  }, batch)
})
