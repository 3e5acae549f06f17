/**
 * Dispatch: routed messages in, facts in the ledger and on their way downstream, an outcome per message out.
 *
 * Handlers run first (all of them, concurrently), their facts get
 * deterministic ids (`tenant + idempotency key + handler + position`), and the
 * whole batch is appended with one ledger call (one RPC per shard). Deciders
 * read their streams first (one RPC per shard), decide against the folded
 * state, and append with `expected_version`; on a version conflict they re-read
 * and decide again, up to `maxDecideRounds`. A decider whose stream already
 * holds facts caused by this very message decides nothing new: the message was
 * decided before (a redelivery). Last, the batch's facts — new ones, and the
 * stored ones a redelivered message re-appended — are relayed once for the
 * batch (FactRelay); a message is only done once its facts are sent or owned
 * by their shard's outbox. Stream identity is `tenant/subject`, never the shard.
 * `decide` (handlers, deciders' reads and decisions: nothing written) and
 * `commit` (appends, relay) are separate steps, so the events consumer can
 * claim its keys while the batch is being decided and drop what the claim refuses.
 * The facts of a decision carry the message's trace (a new parent-id for the
 * decision); a redelivery that finds them stored keeps the stored trace.
 * Timer requests are recorded as `timer_scheduled` / `timer_cancelled` facts
 * of the decision (`after` counts from the message's `created_at`).
 * Each decision runs with its module's services (`Registry.runDeclared`:
 * the module's layer, built once per isolate by ModuleLayers).
 * Facts are written at their definition's latest `schema_version`; a decider
 * folds its stream in the latest shape (older facts upcast, in memory), and a
 * fact of a version newer than the code fails the message permanently.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import { type Fact, TraceContext } from "@factline/schemas"
import * as FactId from "../ledger/FactId.js"
import { type AppendOutcome, Ledger } from "../ledger/Ledger.js"
import type { AppendGroup, FactDraft } from "../ledger/LedgerProtocol.js"
import * as Shards from "../ledger/Shards.js"
import * as Consumer from "../consuming/Consumer.js"
import * as Deadline from "../consuming/Deadline.js"
import * as Failure from "../failures/Failure.js"
import * as FactRelay from "../relay/FactRelay.js"
import type * as Handler from "../definitions/Handler.js"
import { Registry, type Routed, runDeclared, type Shape as RegistryShape, type Stamped } from "../registry/Registry.js"
import * as Timer from "../definitions/Timer.js"
import * as Telemetry from "../platform/Telemetry.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import * as DeciderSnapshots from "./DeciderSnapshots.js"

export const maxDecideRounds = 5

type Item = Consumer.Item<Routed>

/** The facts of one decision: ids from the message, and the message's trace with a new parent-id (W3C: the deciding span's, when exported — Telemetry.sender). */
const drafts = (routed: Routed, decision: ReadonlyArray<Stamped | Timer.Request>, now: string, sender: (traceparent: string | undefined) => string | undefined): Promise<Array<FactDraft>> => {
  const traceparent = sender(routed.message.traceparent) ?? TraceContext.child(routed.message.traceparent)
  return Promise.all(
    decision.map((d) => Timer.record(d, routed.message.createdAt)).map(async (fact, position): Promise<FactDraft> => ({
      fact_id: await FactId.make({ tenantId: routed.message.tenantId, cause: routed.message.idempotencyKey, decidedBy: routed.handler.name, position }),
      type: fact.type,
      data: fact.data as Record<string, unknown>,
      ...(fact.schema_version === undefined ? {} : { schema_version: fact.schema_version }),
      causation_id: routed.message.idempotencyKey,
      correlation_id: routed.message.correlationId,
      caused_by: routed.handler.name,
      created_at: now,
      traceparent
    }))
  )
}

const streamOf = (routed: Routed) => ({ tenant_id: routed.message.tenantId, stream: routed.message.subject })

/** The handler's or decider's decision, run and checked as the registry prescribes (`runDeclared`). */
const runDecision = (routed: Routed, state: unknown) =>
  runDeclared(routed.handler, () =>
    routed.handler._tag === "Handler" ? routed.handler.handle(routed.message) : routed.handler.decide(routed.message, state))

/**
 * A decider folds only the fact types it declares (`emits` and `reads`), each in its latest shape; a fact
 * it cannot read (newer than the code) fails the decision permanently. A throw in `evolve` is a defect.
 * It folds from `start` (its snapshot, DeciderSnapshots) the facts after the sequence the start covers.
 */
export const fold = (decider: Handler.Decider, facts: ReadonlyArray<Fact>, latest: RegistryShape["latest"], start: DeciderSnapshots.Start = { state: decider.initialState, after: 0 }) =>
  Effect.suspend(() => {
    let state = start.state
    for (const fact of facts) {
      if (fact.sequence <= start.after || !decider.folds.has(fact.type)) continue
      const current = latest(fact)
      if (Result.isFailure(current)) return Effect.fail(current.failure)
      state = decider.evolve(state, current.success as never)
    }
    return Effect.succeed(state)
  })

/** What one batch has decided so far: outcomes, and the facts each message must relay before it is done. */
export class Progress {
  readonly outcomes = new Map<string, Consumer.Outcome>()
  readonly toRelay = new Map<string, ReadonlyArray<Fact>>()
  settle(key: string, outcome: Consumer.Outcome) {
    this.outcomes.set(key, outcome)
  }
  fail(keys: Iterable<string>, error: string) {
    for (const key of keys) this.outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: error })))
  }
  /** Done once its facts are relayed. */
  relay(key: string, facts: ReadonlyArray<Fact>) {
    this.outcomes.set(key, Consumer.done)
    if (facts.length > 0) this.toRelay.set(key, facts)
  }
  /** Settled as `outcome` whatever was decided for it: nothing of its decision is appended or relayed. */
  refuse(key: string, outcome: Consumer.Outcome) {
    this.outcomes.set(key, outcome)
    this.toRelay.delete(key)
  }
}

/** Plain handlers: decide everything concurrently; no state needed. */
const decidePlain = Effect.fn("Dispatch.decidePlain")(function*(items: ReadonlyArray<Item>, progress: Progress, now: string) {
  const groups: Array<{ key: string; group: AppendGroup }> = []
  const sender = yield* Telemetry.sender
  yield* Effect.forEach(items, ({ key, value }) =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(runDecision(value, undefined))
      if (Exit.isFailure(exit)) return progress.settle(key, Consumer.failed(Failure.classify(exit.cause)))
      if (exit.value.length === 0) return progress.settle(key, Consumer.done)
      const facts = yield* Effect.promise(() => drafts(value, exit.value, now, sender))
      groups.push({ key, group: { ...streamOf(value), facts } })
    }), { concurrency: "unbounded", discard: true })
  return groups
})

/** Deciders: per stream, in delivery order, each decision sees the previous one's facts. */
const decideWithState = Effect.fn("Dispatch.decideWithState")(function*(items: ReadonlyArray<Item>, states: ReadonlyMap<string, DeciderSnapshots.DeciderState>, progress: Progress, now: string) {
  const { latest, personalFact, hasPersonalData } = yield* Registry
  const groups: Array<{ key: string; group: AppendGroup }> = []
  const sender = yield* Telemetry.sender
  const byStream = new Map<string, Array<Item>>()
  for (const item of items) {
    const stream = Shards.streamKey(streamOf(item.value))
    const list = byStream.get(stream)
    if (list) list.push(item)
    else byStream.set(stream, [item])
  }
  // Deciders fold their streams with personal fields opened (one key ring call for the batch); what is relayed stays sealed.
  const plain = new Map<string, Fact>()
  if (hasPersonalData) {
    const stored = [...byStream.keys()].flatMap((stream) => states.get(stream)!.facts)
    const opened = yield* Effect.result(Sealing.openFacts(yield* KeyRing, personalFact, stored))
    if (Result.isFailure(opened)) {
      progress.fail(items.map((i) => i.key), opened.failure.message)
      return groups
    }
    opened.success.forEach((f) => plain.set(f.fact_id, f))
  }
  for (const [stream, streamItems] of byStream) {
    const state = states.get(stream)!
    let version = state.version
    const known: Array<Fact> = plain.size === 0 ? [...state.facts] : state.facts.map((f) => plain.get(f.fact_id) ?? f)
    for (const { key, value } of streamItems) {
      const decider = value.handler as Handler.Decider
      // A snapshot may cover the stored decision: the read returned it apart (`earlier`).
      const decidedBefore = [...(state.earlier ?? []), ...state.facts].filter((f) => f.causation_id === value.message.idempotencyKey && f.caused_by === decider.name)
      if (decidedBefore.length > 0) {
        // Decided by an earlier delivery: relay those facts again (that delivery may have died before sending).
        progress.relay(key, decidedBefore)
        continue
      }
      const start = state.starts.get(decider.name)!
      const exit = yield* Effect.exit(Effect.flatMap(fold(decider, known, latest, start), (folded) => Effect.map(runDecision(value, folded), (decision) => ({ folded, decision }))))
      if (Exit.isFailure(exit)) {
        progress.settle(key, Consumer.failed(Failure.classify(exit.cause)))
        continue
      }
      if (exit.value.decision.length === 0) {
        progress.settle(key, Consumer.done)
        continue
      }
      const facts = yield* Effect.promise(() => drafts(value, exit.value.decision, now, sender))
      // Later decisions in this batch see these facts, as the ledger will after the append.
      const appended = facts.map((f, i): Fact => ({ ...f, ...streamOf(value), schema_version: f.schema_version ?? 1, sequence: version + i + 1 }))
      known.push(...appended)
      const snapshot = DeciderSnapshots.due(decider, start, version + facts.length)
        ? yield* snapshotAfter(decider, exit.value.folded, appended, latest, version)
        : undefined
      groups.push({ key, group: { ...streamOf(value), expected_version: version, facts, ...(snapshot === undefined ? {} : { snapshot }) } })
      version += facts.length
    }
  }
  return groups
})

/** The snapshot a decision's append carries: the state it decided on, evolved by the facts it appends (stored only if they are). */
const snapshotAfter = (decider: Handler.Decider, folded: unknown, appended: ReadonlyArray<Fact>, latest: RegistryShape["latest"], version: number) =>
  Effect.flatMap(Effect.result(fold(decider, appended, latest, { state: folded, after: version })), (state) =>
    Result.isSuccess(state) ? DeciderSnapshots.encode(decider, state.success, version + appended.length) : Effect.succeed(undefined))

const readStates = (items: ReadonlyArray<Item>) => DeciderSnapshots.readStates(items.map((i) => i.value))

/** Appends, and re-decides deciders that lost a race, up to `maxDecideRounds`. */
const appendAll = Effect.fn("Dispatch.appendAll")(function*(
  initial: ReadonlyArray<{ key: string; group: AppendGroup }>,
  deciders: ReadonlyArray<Item>,
  progress: Progress,
  now: string
) {
  const ledger = yield* Ledger
  let groups = initial
  for (let round = 1; groups.length > 0; round++) {
    const appended = yield* Effect.result(ledger.append(groups.map((g) => g.group)))
    if (Result.isFailure(appended)) return progress.fail(groups.map((g) => g.key), appended.failure.message)
    const conflicted = new Set<string>()
    appended.success.forEach((result: AppendOutcome, i) => {
      const key = groups[i]!.key
      switch (result.status) {
        case "appended":
        case "duplicate":
          return progress.relay(key, result.facts)
        case "idempotency_conflict":
          return progress.settle(key, Consumer.failed(new Failure.PermanentError({ reason: "idempotency_conflict", message: result.message })))
        case "unavailable":
          // Its shard only: the groups on other shards are settled on their own.
          return progress.fail([key], result.message)
        case "version_conflict":
          return void conflicted.add(key)
      }
    })
    if (conflicted.size === 0) return
    const pending = deciders.filter((d) => conflicted.has(d.key))
    if (round >= maxDecideRounds) return progress.fail(conflicted, `stream version kept changing under ${maxDecideRounds} decisions in a row`)
    // A round is the unit of the invocation's time budget (Deadline): past it, the deciders that lost their race
    // (nothing of theirs written) go back to the queue unstarted; the rest of the batch is done and acked.
    if (yield* Deadline.passed) {
      for (const key of conflicted) progress.settle(key, Deadline.handedBack)
      return
    }
    yield* Effect.logDebug(`re-deciding ${conflicted.size} message(s) after a version conflict`)
    const states = yield* Effect.result(readStates(pending))
    if (Result.isFailure(states)) return progress.fail(conflicted, states.failure.message)
    groups = yield* decideWithState(pending, states.success, progress, now)
  }
})

/** A batch decided, nothing written yet: what `commit` appends and relays. */
export interface Decided {
  readonly progress: Progress
  readonly groups: ReadonlyArray<{ readonly key: string; readonly group: AppendGroup }>
  readonly deciders: ReadonlyArray<Item>
  readonly now: string
}

/**
 * Decides the batch without writing: handlers run, deciders read their streams (one RPC per shard) and decide.
 * Only reads and the handlers' pure code: the events consumer runs it while its keys are being claimed, and
 * drops the decisions of the messages the claim refuses (as a redelivery re-runs a handler whose facts are stored).
 */
export const decide = Effect.fn("Dispatch.decide")(function*(items: ReadonlyArray<Item>) {
  const progress = new Progress()
  const now = new Date(yield* Clock.currentTimeMillis).toISOString()
  const groups = yield* decidePlain(items.filter((i) => i.value.handler._tag === "Handler"), progress, now)
  const deciders = items.filter((i) => i.value.handler._tag === "Decider")
  if (deciders.length > 0) {
    const states = yield* Effect.result(readStates(deciders))
    if (Result.isFailure(states)) progress.fail(deciders.map((p) => p.key), states.failure.message)
    else groups.push(...yield* decideWithState(deciders, states.success, progress, now))
  }
  return { progress, groups, deciders, now } satisfies Decided
})

/**
 * Appends what `decide` decided and relays it; `refused` settles messages whose decisions must not be written
 * (their outcome is given: a key bound to another payload, a key not claimed). A decider decided after a refused
 * message of its stream expected that message's facts: its append meets a version conflict, and it decides again
 * against what is stored.
 */
export const commit = Effect.fn("Dispatch.commit")(function*(decided: Decided, refused: ReadonlyMap<string, Consumer.Outcome> = new Map()) {
  const { progress, now } = decided
  for (const [key, outcome] of refused) progress.refuse(key, outcome)
  const kept = <A extends { readonly key: string }>(xs: ReadonlyArray<A>) => refused.size === 0 ? xs : xs.filter((x) => !refused.has(x.key))
  yield* appendAll(kept(decided.groups), kept(decided.deciders), progress, now)
  yield* FactRelay.relayFor(progress.toRelay, progress.outcomes)
  return progress.outcomes as ReadonlyMap<string, Consumer.Outcome>
})

/** Decides, appends and relays a batch: `decide`, then `commit`. */
export const dispatch = Effect.fn("Dispatch.dispatch")(function*(items: ReadonlyArray<Item>) {
  return yield* commit(yield* decide(items))
})
