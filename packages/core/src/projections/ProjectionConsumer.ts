/**
 * The consumer of `factline-projections`: facts in, read models updated.
 *
 * Per batch, two D1 round trips whatever its size: the lookup of running
 * rebuilds, and one transaction that applies every fact to the `facts`
 * projection and to each registered projection (and to a rebuild's shadow
 * table while one runs). No inbox: every write is idempotent by construction
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

/** Every statement that applies these facts to every projection (and running rebuilds' shadows). */
export const statementsFor = (router: Router, facts: ReadonlyArray<Fact>, rebuilds: ReadonlyArray<ActiveRebuild>): ReadonlyArray<Projection.Sql> => [
  ...Projection.factsStatements(facts),
  ...facts.flatMap((fact) =>
    router.projections.flatMap((p) => [
      ...Projection.statementsFor(p, fact),
      ...rebuilds.filter((r) => r.projection === p.name).flatMap((r) => Projection.statementsFor(p, fact, Projection.shadowTarget(p, r.shadow_table)))
    ])
  )
]

export const process = (router: Router) => (items: ReadonlyArray<{ readonly key: string; readonly value: FactPayload }>) =>
  Effect.gen(function*() {
    const store = yield* ProjectionStore
    const outcomes = new Map<string, Consumer.Outcome>()
    const rebuilds = yield* Effect.orElseSucceed(store.query<ActiveRebuild>(activeRebuilds), () => null)
    if (rebuilds === null) {
      for (const item of items) outcomes.set(item.key, Consumer.transient("could not read running rebuilds"))
      return outcomes
    }
    const groups = items.flatMap(({ key, value }) => {
      try {
        const statements = statementsFor(router, [value.fact], rebuilds)
        return [{ key, statements }]
      } catch (error) {
        outcomes.set(key, Consumer.permanent("permanent_failure", error instanceof Error ? error.message : String(error)))
        return []
      }
    })
    const failed = yield* store.write(groups)
    for (const { key } of groups) {
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
