/**
 * The consumer of `factline-projections`: facts in, read models updated.
 *
 * Per batch, two D1 round trips whatever its size: the lookup of running
 * rebuilds, and one transaction that applies every fact to each registered
 * projection (and to a rebuild's shadow table while one runs) and, for the
 * fact types `FACTLINE_FACTS_COPY` names (FactsCopy; none by default), to
 * the D1 `facts` copy — a few set-based statements per projection, not
 * one per fact. If that transaction fails, each fact is written on its own. No inbox: every write is idempotent by construction
 * (row guards, applied sets, `ON CONFLICT DO NOTHING`), so a redelivered
 * fact changes nothing and costs no bookkeeping rows. A mapping that throws
 * fails that fact for that projection only: the fact is still written to the
 * `facts` copy (when copied) and every other projection, then dead-lettered (permanent)
 * naming the projection — replaying it after the fix is safe for the same
 * reason redelivery is. Facts are applied (and copied) in their type's
 * latest shape (Registry.latest: older `schema_version`s upcast in memory);
 * a fact newer than the code is applied nowhere and dead-lettered naming its
 * type and version.
 *
 * A projection whose write fails is isolated the same way: when the one
 * transaction fails, the `facts` copy and each projection are written in their
 * own transaction (one round trip each, on this slow path only). A projection
 * whose table does not exist fails its facts permanently (`projection_not_migrated`,
 * naming the projection and its table: apply the migration, then replay — the
 * catch-up replays it too); any other failure retries only the failed writers'
 * facts, found fact by fact (all of those writers for one fact in one round trip).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Result from "effect/Result"
import type { Fact, FactPayload, FailureReason } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as Deadline from "../consuming/Deadline.js"
import * as Failure from "../failures/Failure.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as FactMessage from "../relay/FactMessage.js"
import * as Projection from "../definitions/Projection.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import { Registry, type Shape as RegistryShape } from "../registry/Registry.js"
import * as FactsCopy from "./FactsCopy.js"
import * as ProjectionStore from "./ProjectionStore.js"
import * as Units from "../placement/Units.js"
import * as Parts from "../placement/Parts.js"

export const ActiveRebuild = Schema.Struct({ projection: Schema.String, shadow_table: Schema.String })
export type ActiveRebuild = typeof ActiveRebuild.Type

export const activeRebuilds: Projection.Sql = {
  sql: "SELECT projection, shadow_table FROM projection_rebuilds WHERE status = 'running'",
  params: []
}

/** A projection whose mapping threw for a fact: that fact is left out of that projection only. */
export interface MappingFailure {
  readonly projection: string
  readonly error: string
}

export interface Plan {
  readonly statements: ReadonlyArray<Projection.Sql>
  /** By the fact's position in the input: the projections that could not map it (absent when all could). */
  readonly failures: ReadonlyMap<number, ReadonlyArray<MappingFailure>>
  /** The same statements by writer: the `facts` copy (`projection` undefined) and each projection (its live table and shadows). */
  readonly groups: ReadonlyArray<{ readonly projection: Projection.Projection | undefined; readonly statements: ReadonlyArray<Projection.Sql> }>
}

const reason = (error: unknown) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error))

/**
 * The facts `p` can map, and the ones its mapping throws for (by position in
 * `facts`, with the error), found one by one in memory: for when the mapping
 * of a whole batch threw. Live traffic and rebuild replays both use it, so one
 * bad fact never holds back the others.
 */
export const partitionMappable = (p: Projection.Projection, facts: ReadonlyArray<Fact>) => {
  const failed: Array<{ readonly index: number; readonly fact: Fact; readonly error: string }> = []
  const mappable = facts.filter((fact, index) => {
    try {
      Projection.batchStatements(p, [fact])
      return true
    } catch (error) {
      failed.push({ index, fact, error: reason(error) })
      return false
    }
  })
  return { mappable, failed }
}

/** The statements that apply `facts` to one projection: its live table and the shadows of its running rebuilds. Throws as its mapping does. */
const projectionStatements = (p: Projection.Projection, facts: ReadonlyArray<Fact>, rebuilds: ReadonlyArray<ActiveRebuild>) =>
  [Projection.liveTarget(p), ...rebuilds.filter((r) => r.projection === p.name).map((r) => Projection.shadowTarget(p, r.shadow_table))]
    .flatMap((target) => Projection.batchStatements(p, facts, target))

/** One fact's statements for one projection; none when its mapping throws for it (that failure is already recorded). */
const oneFact = (p: Projection.Projection, fact: Fact, rebuilds: ReadonlyArray<ActiveRebuild>) => {
  try {
    return projectionStatements(p, [fact], rebuilds)
  } catch {
    return []
  }
}

/**
 * The statements that apply these facts to every registered projection (and
 * running rebuilds' shadows) and, for the types `copy` names, to the `facts`
 * copy: a few per projection whatever the number of facts. Projections are
 * isolated from each other: when a projection's mapping throws, the facts it
 * threw for (found one by one, in memory) are left out of that projection
 * alone — the `facts` copy and every other projection still get them.
 */
export const plan = (
  registry: RegistryShape,
  facts: ReadonlyArray<Fact>,
  rebuilds: ReadonlyArray<ActiveRebuild>,
  copy: FactsCopy.FactsCopy,
  copies: ReadonlyArray<Fact> = facts,
  writers: Units.Writers = { home: true, projections: [] }
): Plan => {
  const failures = new Map<number, Array<MappingFailure>>()
  // The facts copy lives in the tenant's home; a database holding only some projections of the tenant writes those.
  const copied = !writers.home ? [] : Projection.factsStatements(copy.kind === "all" ? copies : copies.filter((f) => FactsCopy.copies(copy, f.type)))
  const statements = [...copied]
  const groups: Array<Plan["groups"][number]> = [{ projection: undefined, statements: copied }]
  for (const p of registry.projections) {
    if (!Units.writes(writers, p.name)) continue
    const forTargets = (some: ReadonlyArray<Fact>) => projectionStatements(p, some, rebuilds)
    // In parts: only the facts whose row is in this database's parts (by position in `facts`).
    const share = writers.parts?.[p.name]
    const at = facts.flatMap((f, i) => (Parts.holds(p, f, share) ? [i] : []))
    const mine = share === undefined ? facts : at.map((i) => facts[i]!)
    let own: ReadonlyArray<Projection.Sql>
    try {
      own = forTargets(mine)
    } catch {
      const { mappable, failed } = partitionMappable(p, mine)
      for (const { index, error } of failed) failures.set(at[index]!, [...(failures.get(at[index]!) ?? []), { projection: p.name, error }])
      own = forTargets(mappable)
    }
    statements.push(...own)
    if (own.length > 0) groups.push({ projection: p, statements: own })
  }
  return { statements, failures, groups }
}

/**
 * A fact some projection could not map, once everything else was written: a
 * permanent failure naming the projection(s), so the dead letter tells an
 * operator what to fix. Replaying it after the fix re-applies the fact to
 * every projection; the ones that already have it change nothing.
 */
const mappingFailed = (fact: Fact, failures: ReadonlyArray<MappingFailure>): Consumer.Outcome =>
  Consumer.failed(new Failure.PermanentError({ reason: "permanent_failure", message: `${failures.map((f) => `projection "${f.projection}" failed to map ${fact.type} fact ${fact.fact_id}: ${f.error}`).join("; ")}` +
      ` (the fact was applied to the facts copy, if copied, and every other projection; fix ${failures.map((f) => f.projection).join(", ")}, then replay this dead letter)` }))

/** Applies the facts of tenants placed on the read database in scope — what the unit's writers write there (one transaction). */
const processPlaced = Effect.fn("ProjectionConsumer.processPlaced")(function*(placed: ReadonlyArray<Units.Placed<{ readonly key: string; readonly value: FactPayload }>>) {
  const items = placed.map((p) => p.item)
  const unit = placed[0]?.writers ?? { home: true, projections: [] }
  const registry = yield* Registry
  const store = yield* ProjectionStore.ProjectionStore
  const factsCopy = yield* FactsCopy.FactsCopySetting
  const outcomes = new Map<string, Consumer.Outcome>()
  const rebuilds = yield* Effect.orElseSucceed(store.query(ActiveRebuild, activeRebuilds), () => null)
  if (rebuilds === null) {
    for (const item of items) outcomes.set(item.key, Consumer.failed(new Failure.TransientError({ message: "could not read running rebuilds" })))
    return outcomes
  }
  // Personal fields opened for the mappings (one key ring call for the batch); the facts copy keeps the fact as stored, sealed.
  const opened = registry.hasPersonalData ? yield* Effect.result(Sealing.openFacts(yield* KeyRing, registry.personalFact, items.map((i) => i.value.fact))) : undefined
  if (opened !== undefined && Result.isFailure(opened)) {
    for (const item of items) outcomes.set(item.key, Consumer.failed(new Failure.TransientError({ message: opened.failure.message })))
    return outcomes
  }
  // Every fact in its type's latest shape; one the code cannot read is left out of everything, and dead-lettered.
  const readable: Array<{ readonly key: string; readonly value: FactPayload; readonly copy: Fact }> = []
  items.forEach((item, index) => {
    const plain = opened === undefined ? item.value.fact : opened.success[index]!
    const current = registry.latest(plain)
    if (Result.isFailure(current)) return void outcomes.set(item.key, Consumer.failed(current.failure))
    const value = current.success === item.value.fact ? item.value : { ...item.value, fact: current.success }
    readable.push({ key: item.key, value, copy: plain === item.value.fact ? current.success : item.value.fact })
  })
  const facts = readable.map((i) => i.value.fact)
  const { statements, failures, groups } = plan(registry, facts, rebuilds, factsCopy, readable.map((i) => i.copy), unit)
  // On the slow path only: the facts copy and each projection on its own (their keys are their positions).
  const failedGroups = yield* store.write(statements, () => groups.map((g, at) => ({ key: String(at), statements: g.statements })))
  /** By fact key: why its write failed, transient (retried) or not, and a permanent one's reason (`defect` for the door's `Bug`). */
  const writeFailures = new Map<string, { readonly error: string; readonly permanent: boolean; readonly reason: FailureReason }>()
  // A fact several writers failed: permanent only if every one of them is (a transient one may still apply); a
  // defect only if every one is.
  const failWrite = (key: string, error: string, permanent: boolean, reason: FailureReason = "permanent_failure") => {
    const before = writeFailures.get(key)
    writeFailures.set(key, before === undefined
      ? { error, permanent, reason }
      : { error: `${before.error}; ${error}`, permanent: before.permanent && permanent, reason: before.reason === reason ? reason : "permanent_failure" })
  }
  // Writers that failed for another reason than a missing table (the door's classification: a Bug naming it): their facts one by one, so one bad fact does
  // not hold back the rest. While another writer could write, each failed writer on its own (its failures are
  // its own, named by it); when none could (the store is down, most likely), every failed writer's statements
  // for a fact in one transaction — one round trip per fact, not one per writer and fact.
  const retried: Array<Plan["groups"][number]> = []
  for (const [at, error] of failedGroups) {
    const group = groups[Number(at)]!
    const p = group.projection
    if (p === undefined || !ProjectionStore.isMissingTable(error)) {
      retried.push(group)
      continue
    }
    // The facts this projection writes something for (a mapping may return nothing for a fact).
    const mine = readable.filter(({ value }) => p.byType.has(value.fact.type) && Parts.holds(p, value.fact, unit.parts?.[p.name]) && oneFact(p, value.fact, rebuilds).length > 0)
    const why = ProjectionStore.notMigratedMessage(p)
    console.error(JSON.stringify({ level: "error", message: "projection not migrated", projection: p.name, table: Projection.tableName(p), facts: mine.length, error: error.message }))
    for (const { key, value } of mine) {
      failWrite(key, `projection_not_migrated: ${why}; ${value.fact.type} fact ${value.fact.fact_id} was applied to the facts copy, if copied, and every other projection; apply the migration, then replay this dead letter (or let the projection catch up)`, true)
    }
  }
  const statementsOf = (writers: ReadonlyArray<Plan["groups"][number]>, fact: Fact, copy: Fact) =>
    writers.flatMap(({ projection: p }) =>
      p === undefined
        ? (unit.home && FactsCopy.copies(factsCopy, fact.type) ? Projection.factsStatements([copy]) : [])
        : (p.byType.has(fact.type) && Parts.holds(p, fact, unit.parts?.[p.name]) ? oneFact(p, fact, rebuilds) : []))
  const nameOf = ({ projection: p }: Plan["groups"][number]) => (p === undefined ? "the facts copy" : `projection "${p.name}"`)
  const noneWrote = failedGroups.size === groups.filter((g) => g.statements.length > 0).length
  for (const writers of noneWrote ? [retried] : retried.map((g) => [g])) {
    if (writers.length === 0) continue
    const alone = yield* store.writeEach(readable.map(({ key, value, copy }) => ({ key, statements: statementsOf(writers, value.fact, copy) })))
    // Permanent when the door says the statement cannot succeed (a constraint, a bug), retried when D1 was down.
    for (const [key, e] of alone) failWrite(key, `${writers.map(nameOf).join(", ")}: ${e.message}`, !e.retryable, e.reason)
  }
  readable.forEach(({ key, value }, index) => {
    const failedWrite = writeFailures.get(key)
    const error = failedWrite?.error
    const unmapped = failures.get(index)
    // The error text in the log (Workers Logs indexes JSON lines), not only in the dead letter.
    if (unmapped !== undefined) {
      for (const f of unmapped) {
        console.error(JSON.stringify({ level: "error", message: "projection mapping failed", projection: f.projection, fact_type: value.fact.type, fact_id: value.fact.fact_id, traceparent: value.fact.traceparent, error: f.error }))
      }
    }
    if (error !== undefined && failedWrite?.permanent !== true) {
      console.error(JSON.stringify({ level: "error", message: "projection write failed", fact_type: value.fact.type, fact_id: value.fact.fact_id, traceparent: value.fact.traceparent, error }))
    }
    outcomes.set(
      key,
      failedWrite?.permanent === true
        ? Consumer.failed(new Failure.PermanentError({ reason: failedWrite.reason, message: failedWrite.error }))
        : error !== undefined
        ? Consumer.failed(new Failure.TransientError({ message: `projection write failed: ${error}` }))
        : unmapped !== undefined
        ? mappingFailed(value.fact, unmapped)
        : Consumer.done
    )
  })
  return outcomes as ReadonlyMap<string, Consumer.Outcome>
})

/**
 * A fact written by several units (its tenant's home, a database holding one of its projections): a failure wins
 * over success, and a retryable failure over a permanent one (the retry writes every unit again, idempotently, and
 * meets the permanent failure again if it lasts).
 */
const worse = (a: Consumer.Outcome, b: Consumer.Outcome): Consumer.Outcome => {
  if (Result.isFailure(a) && a.failure.retryable) return a
  if (Result.isFailure(b) && b.failure.retryable) return b
  return Result.isFailure(a) ? a : b
}

/**
 * Applies a batch's facts, each tenant's on its read databases: one transaction per database (and, for a tenant
 * whose projection is placed elsewhere, per what that database writes: Units.byDatabase). A unit is the unit of
 * the invocation's time budget (Deadline): the first is always written; the next only while the budget lasts, else
 * its facts are handed back unstarted.
 */
export const process = (items: ReadonlyArray<{ readonly key: string; readonly value: FactPayload }>) =>
  Effect.flatMap(Effect.service(Registry), (registry) =>
    Units.byDatabase(
      items,
      (item) => item.value.fact.tenant_id,
      (item) => item.key,
      Deadline.guarded(processPlaced, (placed) => placed.item.key),
      (error) => Consumer.failed(error),
      { merge: worse, concerns: (projection, item) => registry.projection(projection)?.byType.has(item.value.fact.type) ?? false }
    ))

export const consume = Effect.fn("ProjectionConsumer.consume")(function*(batch: MessageBatch<unknown>, options: Consumer.Options = {}) {
  return yield* Consumer.run(
    { policy: RetryPolicy.projections, decode: FactMessage.decode, isolate: FactMessage.isolate, process, delayScale: options.delayScale, log: options.log, runs: options.runs },
    batch
  )
})
