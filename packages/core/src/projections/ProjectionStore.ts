/**
 * Where projections are written and read: D1, through bound statements only.
 *
 * `write` runs a batch's statements in ONE `db.batch()` — one round trip and
 * one transaction for a whole queue batch. If that transaction fails, the
 * batch is written again group by group (one group per fact, built only
 * then) so that one bad fact cannot hold back the others (the slow path only
 * runs on failure). `query` runs one read.
 */
import { Context, Effect, Layer, Result } from "effect"
import type { Sql, Value } from "../definitions/Projection.js"
import * as Door from "../platform/Sql.js"
import * as Placement from "../placement/Placement.js"
import * as Failure from "../failures/Failure.js"

const unavailable = Failure.unavailable("the projection store")

export interface Group {
  readonly key: string
  readonly statements: ReadonlyArray<Sql>
}

/** The store over one database. */
export interface Shape<R = never> {
  /**
   * Runs `statements` in one transaction; if it fails, runs each of
   * `isolate()`'s groups in its own transaction instead. Returns the error per
   * group key that failed on its own (empty when all applied).
   */
  readonly write: (statements: ReadonlyArray<Sql>, isolate: () => ReadonlyArray<Group>) => Effect.Effect<ReadonlyMap<string, string>, never, R>
  readonly query: <T = Record<string, Value>>(statement: Sql) => Effect.Effect<ReadonlyArray<T>, Failure.Unavailable, R>
  /** Runs statements as one transaction (one round trip); all or nothing. */
  readonly execute: (statements: ReadonlyArray<Sql>) => Effect.Effect<void, Failure.Unavailable, R>
}

/** Projections and the facts copy of the tenant(s) in scope: every call runs on the read database the placement scope provides. */
export class ProjectionStore extends Context.Service<ProjectionStore, Shape<Door.ReadDatabase>>()("@factline/core/ProjectionStore") {
  static readonly layer = Layer.sync(ProjectionStore, () => {
    const on = Placement.perDatabase(make)
    const inScope = Effect.map(Effect.service(Door.ReadDatabase), on)
    return {
      write: (statements, isolate) => Effect.flatMap(inScope, (store) => store.write(statements, isolate)),
      execute: (statements) => Effect.flatMap(inScope, (store) => store.execute(statements)),
      query: <T>(statement: Sql) => Effect.flatMap(inScope, (store) => store.query<T>(statement))
    }
  })
}

export const make = (sql: Door.Sql): Shape => ({
  write: Effect.fn("ProjectionStore.write")(function*(statements, isolate) {
    const failed = new Map<string, string>()
    if (statements.length === 0) return failed
    const together = yield* Effect.result(sql.batch(statements))
    if (Result.isSuccess(together)) return failed
    for (const group of isolate()) {
      if (group.statements.length === 0) continue
      const alone = yield* Effect.result(sql.batch(group.statements))
      if (Result.isFailure(alone)) failed.set(group.key, alone.failure.message)
    }
    return failed
  }),
  execute: Effect.fn("ProjectionStore.execute")(function*(statements) {
    yield* sql.batch(statements).pipe(Effect.mapError(unavailable))
  }),
  // A generic method: `Effect.fn` would fix `T`, so the span is added with `withSpan`.
  query: <T>(statement: Sql) =>
    sql.all<T>(statement).pipe(Effect.mapError(unavailable), Effect.withSpan("ProjectionStore.query"))
})
