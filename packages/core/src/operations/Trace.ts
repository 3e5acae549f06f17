/**
 * A fact's causation chain (`GET /v1/facts/:fact_id/trace`): back to the message that caused it (with the
 * idempotency key accepted for it), forward to every fact it caused, breadth first.
 *
 * Facts of one chain share their stream (processors and webhook outcomes append to the parent's stream), so a
 * trace reads that one stream with one ledger call. The stream is the caller's `subject` when given; otherwise
 * every ledger shard of the tenant looks the fact id up in its unique index, in parallel (N indexed lookups, no
 * scan, no D1), and the shard holding it names the stream. Facts are answered in their type's latest shape.
 * It does not follow a chain across streams, nor read facts of another tenant.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { Fact } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import { Ledger } from "../ledger/Ledger.js"
import * as Placement from "../placement/Placement.js"
import * as Schema from "effect/Schema"
import { ProjectionStore } from "../projections/ProjectionStore.js"
import { Registry } from "../registry/Registry.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import type * as RegistryModule from "../registry/Registry.js"

/** A stored fact as readers get it: in its type's latest shape; one newer than this code (or not upcastable) as stored. */
export const latest = (registry: RegistryModule.Shape) => <F extends Fact>(fact: F): F => {
  const current = registry.latest(fact)
  return Result.isSuccess(current) ? (current.success as F) : fact
}

/**
 * Stored facts as readers get them: personal fields opened (the marker `"[erased]"` once erased; one key ring call
 * for them all), each in its type's latest shape. The key store unreachable is `Unavailable` (503, retry).
 */
export const readable = Effect.fn("Trace.readable")(function*<F extends Fact>(facts: ReadonlyArray<F>) {
  const registry = yield* Registry
  const opened = registry.hasPersonalData ? (yield* Sealing.openFacts(yield* KeyRing, registry.personalFact, facts)) as ReadonlyArray<F> : facts
  return opened.map(latest(registry))
})

/** The accepted message that started a chain, if its key is still kept. */
export const Cause = Schema.Struct({ message_type: Schema.String, subject: Schema.String, accepted_at: Schema.String })
export type Cause = typeof Cause.Type

/** The chain of `factId` in the tenant's facts (in `subject`'s stream when given); NotFound when it is not there. */
export const trace = Effect.fn("Trace.trace")(function*(tenantId: string, factId: string, subject?: string | undefined) {
  const ledger = yield* Ledger
  const stream = subject ?? (yield* ledger.findFact(tenantId, factId))?.stream
  if (stream === undefined) return yield* new Failure.NotFound({ message: `no fact ${JSON.stringify(factId.slice(0, 100))} for this tenant` })
  const streams = yield* ledger.readStreams([{ tenant_id: tenantId, stream }])
  const facts = yield* readable(streams[0]?.facts ?? [])
  const byId = new Map(facts.map((f) => [f.fact_id, f]))
  const fact = byId.get(factId)
  if (!fact) return yield* new Failure.NotFound({ message: `no fact ${JSON.stringify(factId.slice(0, 100))} in stream ${JSON.stringify(stream.slice(0, 200))} for this tenant` })
  // Back: follow causation ids while they name facts of the stream; the last one names the message.
  const back = [fact]
  for (let cur = fact; byId.has(cur.causation_id) && back.length <= facts.length;) {
    cur = byId.get(cur.causation_id)!
    back.unshift(cur)
  }
  const root = back[0]!.causation_id
  // Forward: everything caused by this fact, breadth first, with how many hops from it.
  const children = new Map<string, Array<Fact>>()
  for (const f of facts) children.set(f.causation_id, [...(children.get(f.causation_id) ?? []), f])
  const forward: Array<Fact & { readonly depth: number }> = []
  const queue: Array<{ id: string; depth: number }> = [{ id: fact.fact_id, depth: 1 }]
  while (queue.length > 0 && forward.length < facts.length) {
    const { id, depth } = queue.shift()!
    for (const child of children.get(id) ?? []) {
      forward.push({ ...child, depth })
      queue.push({ id: child.fact_id, depth: depth + 1 })
    }
  }
  // The key may have expired (AcceptedKeys' prune) or its read fail: the chain stands without it.
  const accepted = yield* Placement.reading(tenantId)(Effect.flatMap(Effect.service(ProjectionStore), (store) =>
    store.query(Cause, {
      sql: "SELECT message_type, subject, accepted_at FROM accepted_keys WHERE tenant_id = ? AND idempotency_key = ?",
      params: [tenantId, root]
    }).pipe(Effect.orElseSucceed((): ReadonlyArray<Cause> => []))))
  return {
    fact_id: fact.fact_id,
    subject: stream,
    correlation_id: fact.correlation_id,
    traceparent: fact.traceparent ?? null,
    cause: { idempotency_key: root, message: accepted[0] ?? null },
    back,
    forward
  }
})
