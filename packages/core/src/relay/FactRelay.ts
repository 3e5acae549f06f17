/**
 * The relay: new facts from the consumer that appended them to the queues downstream.
 *
 * Once per consumer batch, after the appends: the facts are grouped by
 * destination queue — the tenant's group queue for a grouped destination
 * (Queues.route; the handover keeps the logical destination, the
 * shard's outbox routes it again) — packed several to a message (FactMessage.pack) and sent
 * through the queues' door: one `sendBatch` per destination (more only past 100 messages / 256 KB).
 * Whatever could not be sent — a failed send, a failed R2 offload — is handed
 * to the facts' shards (`Ledger.handover`), whose outbox and alarm relay it
 * later; only facts that were neither sent nor handed over are reported back,
 * and the caller must not ack the messages that caused them. A redelivered
 * message re-appends as a duplicate and relays its stored facts again: every
 * consumer downstream dedupes by fact id, so a double send changes nothing.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { type Fact, TraceContext } from "@factline/schemas"
import { Ledger, type StreamHandover } from "../ledger/Ledger.js"
import * as Shards from "../ledger/Shards.js"
import { PayloadStore } from "../producing/PayloadStore.js"
import { Queues } from "../platform/Queues.js"
import { Registry } from "../registry/Registry.js"
import * as Consumer from "../consuming/Consumer.js"
import * as Failure from "../failures/Failure.js"
import * as FactMessage from "./FactMessage.js"

export interface Relayable {
  readonly fact: Fact
  readonly destinations: ReadonlyArray<string>
}

export interface RelayReport {
  /** `sendBatch` calls made. */
  readonly sends: number
  /** Facts handed to their shards' outbox because a send failed. */
  readonly handedOver: number
  /** Fact ids neither sent nor handed over: the messages that caused them must be retried. */
  readonly unrelayed: ReadonlySet<string>
  /** Why something was handed over or left unrelayed, if anything was. */
  readonly error?: string
}

export const relay = (items: ReadonlyArray<Relayable>) =>
  Effect.gen(function*() {
    const queues = yield* Queues
    const payloads = yield* PayloadStore
    const ledger = yield* Ledger

    // Each fact once per destination, whatever the number of causes that returned it.
    // Keyed by the queue sent to; the logical destination is what a handover records.
    const byDestination = new Map<string, Map<string, Fact>>()
    const logical = new Map<string, string>()
    for (const { fact, destinations } of items) {
      for (const destination of destinations) {
        const target = queues.route(destination, fact.tenant_id)
        logical.set(target, destination)
        let facts = byDestination.get(target)
        if (!facts) byDestination.set(target, (facts = new Map()))
        facts.set(fact.fact_id, fact)
      }
    }
    if (byDestination.size === 0) return { sends: 0, handedOver: 0, unrelayed: new Set<string>() } satisfies RelayReport

    const offload = (tenantId: string, name: string, payload: unknown) => Effect.runPromise(payloads.put(tenantId, name, payload))
    // Each fact measured once, whatever the number of destinations it is packed for.
    const measured = new Map<string, number>()
    const bytesOf = (fact: Fact) => {
      let bytes = measured.get(fact.fact_id)
      if (bytes === undefined) measured.set(fact.fact_id, (bytes = FactMessage.factBytes(fact)))
      return bytes
    }
    const results = yield* Effect.forEach([...byDestination], ([destination, facts]) =>
      Effect.gen(function*() {
        const packed = yield* Effect.result(Effect.tryPromise(() => FactMessage.pack([...facts.values()], offload, {}, bytesOf)))
        if (Result.isFailure(packed)) return { destination, sends: 0, unsent: [...facts.values()], error: `could not store a large fact in R2: ${String(packed.failure)}` }
        const messages = packed.success
        const sent = yield* Effect.result(queues.send(destination, messages.map((m) => m.body), { sizes: messages.map((m) => m.bytes) }))
        if (Result.isFailure(sent)) {
          return { destination, sends: sent.failure.calls, unsent: messages.slice(sent.failure.sent).flatMap((m) => m.facts), error: sent.failure.message }
        }
        return { destination, sends: sent.success.calls, unsent: [] as Array<Fact>, error: undefined }
      }), { concurrency: "unbounded" })

    const sends = results.reduce((n, r) => n + r.sends, 0)
    const unsent = results.filter((r) => r.unsent.length > 0)
    if (unsent.length === 0) return { sends, handedOver: 0, unrelayed: new Set<string>() } satisfies RelayReport

    // Fallback: the shards' outbox relays what we could not send, with backoff.
    const entries = new Map<string, { fact: Fact; destinations: Array<string> }>()
    for (const { destination: target, unsent: facts } of unsent) {
      const destination = logical.get(target) ?? target
      for (const fact of facts) {
        const entry = entries.get(fact.fact_id)
        if (entry) entry.destinations.push(destination)
        else entries.set(fact.fact_id, { fact, destinations: [destination] })
      }
    }
    const byStream = new Map<string, { tenant_id: string; stream: string; entries: Array<{ fact_id: string; destinations: Array<string> }> }>()
    for (const { fact, destinations } of entries.values()) {
      const key = Shards.streamKey(fact)
      let group = byStream.get(key)
      if (!group) byStream.set(key, (group = { tenant_id: fact.tenant_id, stream: fact.stream, entries: [] }))
      group.entries.push({ fact_id: fact.fact_id, destinations })
    }
    const error = unsent.map((u) => `${u.destination}: ${u.error}`).join("; ")
    // The log lines name the traces of the facts they are about.
    const traced = Effect.annotateLogs({ trace_ids: TraceContext.traceIds([...entries.values()].map(({ fact }) => fact.traceparent)) })
    const handed = yield* Effect.result(ledger.handover([...byStream.values()] satisfies ReadonlyArray<StreamHandover>))
    if (Result.isFailure(handed)) {
      yield* traced(Effect.logWarning(`relay failed and the shards could not take the facts over: ${error}; ${handed.failure.message}`))
      return { sends, handedOver: 0, unrelayed: new Set(entries.keys()), error: `${error}; handover failed: ${handed.failure.message}` } satisfies RelayReport
    }
    // A shard that could not take its facts leaves only those unrelayed.
    const unrelayed = new Set([...entries.values()].filter(({ fact }) => handed.success.has(Shards.streamKey(fact))).map(({ fact }) => fact.fact_id))
    yield* traced(Effect.logWarning(`relay failed, ${entries.size - unrelayed.size} fact(s) handed to their shards' outbox, ${unrelayed.size} left unrelayed: ${error}`))
    return {
      sends,
      handedOver: entries.size - unrelayed.size,
      unrelayed,
      error: unrelayed.size === 0 ? error : `${error}; ${handed.success.size} stream(s) could not be handed to their shard`
    } satisfies RelayReport
  })

/**
 * Relays every message's facts once for the batch, to the destinations the
 * registry gives their types; a message whose facts could not be relayed
 * (neither sent nor handed over) gets a transient outcome: it is retried.
 */
export const relayFor = (toRelay: ReadonlyMap<string, ReadonlyArray<Fact>>, outcomes: Map<string, Consumer.Outcome>) =>
  Effect.gen(function*() {
    if (toRelay.size === 0) return
    const registry = yield* Registry
    const report = yield* relay([...toRelay.values()].flatMap((facts) => facts.map((fact) => ({ fact, destinations: registry.destinationsFor(fact.type) }))))
    if (report.unrelayed.size === 0) return
    for (const [key, facts] of toRelay) {
      if (facts.some((f) => report.unrelayed.has(f.fact_id))) outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: `facts could not be relayed: ${report.error ?? "unknown error"}` })))
    }
  })
