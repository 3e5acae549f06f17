/**
 * Dispatch: routed messages in, facts in the ledger, an outcome per message out.
 *
 * Handlers run first (all of them, concurrently), their facts get
 * deterministic ids (`tenant + idempotency key + handler + position`), and the
 * whole batch is appended with one ledger call (one RPC per shard). Deciders
 * read their streams first (one RPC per shard), decide against the folded
 * state, and append with `expected_version`; on a version conflict they re-read
 * and decide again, up to `maxDecideRounds`. A decider whose stream already
 * holds facts caused by this very message does nothing: the message was
 * decided before (e.g. a crash between the append and the inbox write).
 */
import { Effect, Exit, Result } from "effect"
import type { Fact } from "@factline/schemas"
import * as FactId from "../ledger/FactId.js"
import type { NewFact } from "../ledger/FactDefinition.js"
import { Ledger } from "../ledger/Ledger.js"
import type { AppendGroup, AppendResult, FactDraft, StreamState } from "../ledger/LedgerProtocol.js"
import { shardKey } from "../ledger/LedgerProtocol.js"
import * as Consumer from "../consuming/Consumer.js"
import type * as Handler from "./Handler.js"
import type { Routed, Router } from "./Router.js"

export const maxDecideRounds = 5

const drafts = (router: Router, routed: Routed, facts: ReadonlyArray<NewFact>, now: string): Promise<Array<FactDraft>> =>
  Promise.all(
    facts.map(async (fact, position): Promise<FactDraft> => ({
      fact_id: await FactId.make({ tenantId: routed.message.tenantId, cause: routed.message.idempotencyKey, decidedBy: routed.handler.name, position }),
      type: fact.type,
      data: fact.data as Record<string, unknown>,
      causation_id: routed.message.idempotencyKey,
      correlation_id: routed.message.correlationId,
      caused_by: routed.handler.name,
      created_at: now,
      destinations: router.destinationsFor(fact.type)
    }))
  )

const outcomeOf = (result: AppendResult): Consumer.Outcome | "conflict" => {
  switch (result.status) {
    case "appended":
    case "duplicate":
      return Consumer.done
    case "idempotency_conflict":
      return Consumer.permanent("idempotency_conflict", result.message)
    case "version_conflict":
      return "conflict"
  }
}

/** Product code may throw instead of failing: suspend it so a throw becomes a (transient) defect of this message only. */
const runDecision = (routed: Routed, state: unknown) =>
  Effect.suspend(() =>
    routed.handler._tag === "Handler"
      ? routed.handler.handle(routed.message)
      : routed.handler.decide(routed.message, state)
  )

export const dispatch = (router: Router) => (items: ReadonlyArray<{ readonly key: string; readonly value: Routed }>) =>
  Effect.gen(function*() {
    const ledger = yield* Ledger
    const outcomes = new Map<string, Consumer.Outcome>()
    const now = new Date().toISOString()
    const plain = items.filter((i) => i.value.handler._tag === "Handler")
    const decided = items.filter((i) => i.value.handler._tag === "Decider")

    // Plain handlers: decide everything, then one append for the batch.
    const plainGroups: Array<{ key: string; group: AppendGroup }> = []
    yield* Effect.forEach(plain, ({ key, value }) =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(runDecision(value, undefined))
        if (Exit.isFailure(exit)) return void outcomes.set(key, Consumer.fromCause(exit.cause))
        if (exit.value.length === 0) return void outcomes.set(key, Consumer.done)
        const facts = yield* Effect.promise(() => drafts(router, value, exit.value, now))
        plainGroups.push({ key, group: { tenant_id: value.message.tenantId, stream: value.message.subject, facts } })
      }), { concurrency: "unbounded", discard: true })

    // Deciders: per stream, in delivery order, each decision sees the previous one's facts.
    let pending = decided
    const deciderGroups: Array<{ key: string; group: AppendGroup }> = []
    const decideRound = (states: ReadonlyMap<string, StreamState>) =>
      Effect.gen(function*() {
        deciderGroups.length = 0
        const byStream = new Map<string, Array<(typeof decided)[number]>>()
        for (const item of pending) {
          const stream = shardKey({ tenant_id: item.value.message.tenantId, stream: item.value.message.subject })
          byStream.set(stream, [...(byStream.get(stream) ?? []), item])
        }
        for (const [stream, streamItems] of byStream) {
          const state = states.get(stream)!
          let version = state.version
          const known: Array<Fact> = [...state.facts]
          for (const { key, value } of streamItems) {
            const decider = value.handler as Handler.Decider
            if (known.some((f) => f.causation_id === value.message.idempotencyKey && f.caused_by === decider.name)) {
              outcomes.set(key, Consumer.done)
              continue
            }
            const exit = yield* Effect.exit(Effect.flatMap(Effect.sync(() => known.reduce(decider.evolve, decider.initialState)), (folded) => runDecision(value, folded)))
            if (Exit.isFailure(exit)) {
              outcomes.set(key, Consumer.fromCause(exit.cause))
              continue
            }
            if (exit.value.length === 0) {
              outcomes.set(key, Consumer.done)
              continue
            }
            const facts = yield* Effect.promise(() => drafts(router, value, exit.value, now))
            deciderGroups.push({
              key,
              group: { tenant_id: value.message.tenantId, stream: value.message.subject, expected_version: version, facts }
            })
            // Later decisions in this batch see these facts, as the ledger will after the append.
            facts.forEach(({ destinations: _, ...f }, i) => known.push({ ...f, tenant_id: value.message.tenantId, stream: value.message.subject, sequence: version + i + 1 }))
            version += facts.length
          }
        }
      })

    const readStates = (keys: ReadonlyArray<(typeof decided)[number]>) =>
      Effect.gen(function*() {
        const unique = new Map(keys.map((i) => {
          const k = { tenant_id: i.value.message.tenantId, stream: i.value.message.subject }
          return [shardKey(k), k] as const
        }))
        const states = yield* ledger.readStreams([...unique.values()])
        return new Map(states.map((s) => [shardKey(s), s]))
      })

    const fail = (keys: ReadonlyArray<string>, error: string) => keys.forEach((k) => outcomes.set(k, Consumer.transient(error)))

    // Round 1: read decider streams (if any), decide, append everything together.
    if (pending.length > 0) {
      const states = yield* Effect.result(readStates(pending))
      if (Result.isFailure(states)) {
        fail(pending.map((p) => p.key), states.failure.message)
        pending = []
      } else {
        yield* decideRound(states.success)
      }
    }
    let groups = [...plainGroups, ...deciderGroups]
    for (let round = 1; groups.length > 0; round++) {
      const appended = yield* Effect.result(ledger.append(groups.map((g) => g.group)))
      if (Result.isFailure(appended)) {
        fail(groups.map((g) => g.key), appended.failure.message)
        break
      }
      const conflicted = new Set<string>()
      appended.success.forEach((result, i) => {
        const outcome = outcomeOf(result)
        if (outcome === "conflict") conflicted.add(groups[i]!.key)
        else outcomes.set(groups[i]!.key, outcome)
      })
      if (conflicted.size === 0) break
      pending = decided.filter((d) => conflicted.has(d.key))
      if (round >= maxDecideRounds) {
        fail([...conflicted], `stream version kept changing under ${maxDecideRounds} decisions in a row`)
        break
      }
      yield* Effect.logDebug(`re-deciding ${conflicted.size} message(s) after a version conflict`)
      const states = yield* Effect.result(readStates(pending))
      if (Result.isFailure(states)) {
        fail([...conflicted], states.failure.message)
        break
      }
      yield* decideRound(states.success)
      groups = [...deciderGroups]
    }
    return outcomes as ReadonlyMap<string, Consumer.Outcome>
  })
