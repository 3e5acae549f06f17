/**
 * The consumer of `factline-projections`: facts in, read models updated.
 *
 * Per batch, two D1 round trips whatever its size: the lookup of running
 * rebuilds, and one transaction that applies every fact to the `facts`
 * projection and to each registered projection (and to a rebuild's shadow
 * table while one runs) — a few set-based statements per projection, not
 * one per fact. If that transaction fails, each fact is written on its own. No inbox: every write is idempotent by construction
 * (row guards, applied sets, `ON CONFLICT DO NOTHING`), so a redelivered
 * fact changes nothing and costs no bookkeeping rows. A mapping that throws
 * is a permanent failure of that fact only.
 */
import { Effect } from "effect"
import type { Fact, FactPayload } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as FactMessage from "../relay/FactMessage.js"
import type { Router } from "../routing/Router.js"
import * as Projection from "./Projection.js"
import { ProjectionStore } from "./ProjectionStore.js"

export interface ActiveRebuild {
  readonly projection: string
  readonly shadow_table: string
}

export const activeRebuilds: Projection.Sql = {
  sql: "SELECT projection, shadow_table FROM projection_rebuilds WHERE status = 'running'",
  params: []
}

/**
 * The statements that apply these facts to the `facts` projection and to
 * every registered projection (and running rebuilds' shadows): a few per
 * projection whatever the number of facts. Throws if a mapping throws.
 */
export const statementsFor = (router: Router, facts: ReadonlyArray<Fact>, rebuilds: ReadonlyArray<ActiveRebuild>): ReadonlyArray<Projection.Sql> => [
  ...Projection.factsStatements(facts),
  ...router.projections.flatMap((p) => [
    ...Projection.batchStatements(p, facts),
    ...rebuilds.filter((r) => r.projection === p.name).flatMap((r) => Projection.batchStatements(p, facts, Projection.shadowTarget(p, r.shadow_table)))
  ])
]

const reason = (error: unknown) => (error instanceof Error ? error.message : String(error))

export const process = (router: Router) => (items: ReadonlyArray<{ readonly key: string; readonly value: FactPayload }>) =>
  Effect.gen(function*() {
    const store = yield* ProjectionStore
    const outcomes = new Map<string, Consumer.Outcome>()
    const rebuilds = yield* Effect.orElseSucceed(store.query<ActiveRebuild>(activeRebuilds), () => null)
    if (rebuilds === null) {
      for (const item of items) outcomes.set(item.key, Consumer.transient("could not read running rebuilds"))
      return outcomes
    }
    let good = items
    let statements: ReadonlyArray<Projection.Sql>
    try {
      statements = statementsFor(router, items.map((i) => i.value.fact), rebuilds)
    } catch {
      // A mapping threw: find the facts it threw for (pure, in memory) and write the others.
      good = items.filter(({ key, value }) => {
        try {
          statementsFor(router, [value.fact], rebuilds)
          return true
        } catch (error) {
          outcomes.set(key, Consumer.permanent("permanent_failure", reason(error)))
          return false
        }
      })
      statements = statementsFor(router, good.map((i) => i.value.fact), rebuilds)
    }
    const failed = yield* store.write(statements, () => good.map(({ key, value }) => ({ key, statements: statementsFor(router, [value.fact], rebuilds) })))
    for (const { key } of good) {
      const error = failed.get(key)
      outcomes.set(key, error === undefined ? Consumer.done : Consumer.transient(`projection write failed: ${error}`))
    }
    return outcomes as ReadonlyMap<string, Consumer.Outcome>
  })

export const consume = (router: Router, batch: MessageBatch<unknown>, options: { readonly delayScale?: number } = {}) =>
  Consumer.run(
    { policy: RetryPolicy.projections, decode: FactMessage.decode, isolate: FactMessage.isolate, process: process(router), delayScale: options.delayScale },
    batch
  )
