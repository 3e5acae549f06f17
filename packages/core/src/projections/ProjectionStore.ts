/**
 * Where projections are written and read: D1, through bound statements only.
 *
 * `write` runs a batch's statements in ONE `db.batch()` — one round trip and
 * one transaction for a whole queue batch. If that transaction fails, the
 * batch is written again group by group (one group per fact, built only
 * then) so that one bad fact cannot hold back the others (the slow path only
 * runs on failure). `query` runs one read.
 */
import { Context, Effect, Layer } from "effect"
import type { Sql, Value } from "../definitions/Projection.js"
import * as Failure from "../failures/Failure.js"

export interface Group {
  readonly key: string
  readonly statements: ReadonlyArray<Sql>
}

export class ProjectionStore extends Context.Service<ProjectionStore, {
  /**
   * Runs `statements` in one transaction; if it fails, runs each of
   * `isolate()`'s groups in its own transaction instead. Returns the error per
   * group key that failed on its own (empty when all applied).
   */
  readonly write: (statements: ReadonlyArray<Sql>, isolate: () => ReadonlyArray<Group>) => Effect.Effect<ReadonlyMap<string, string>>
  readonly query: <T = Record<string, Value>>(statement: Sql) => Effect.Effect<ReadonlyArray<T>, Failure.Unavailable>
  /** Runs statements as one transaction (one round trip); all or nothing. */
  readonly execute: (statements: ReadonlyArray<Sql>) => Effect.Effect<void, Failure.Unavailable>
}>()("@factline/core/ProjectionStore") {
  static readonly layer = (db: D1Database) => Layer.succeed(ProjectionStore, make(db))
}

const message = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

export const make = (db: D1Database): ProjectionStore["Service"] => {
  const prepare = (s: Sql) => db.prepare(s.sql).bind(...s.params)
  return {
    write: (statements, isolate) =>
      Effect.promise(async () => {
        const failed = new Map<string, string>()
        if (statements.length === 0) return failed
        try {
          await db.batch(statements.map(prepare))
          return failed
        } catch {
          for (const group of isolate()) {
            if (group.statements.length === 0) continue
            try {
              await db.batch(group.statements.map(prepare))
            } catch (cause) {
              failed.set(group.key, message(cause))
            }
          }
          return failed
        }
      }),
    execute: (statements) =>
      statements.length === 0
        ? Effect.void
        : Effect.tryPromise({
          try: () => db.batch(statements.map(prepare)),
          catch: (cause) => new Failure.Unavailable({ service: "the projection store", message: message(cause) })
        }).pipe(Effect.asVoid),
    query: <T>(statement: Sql) =>
      Effect.tryPromise({
        try: async () => (await prepare(statement).all<T>()).results,
        catch: (cause) => new Failure.Unavailable({ service: "the projection store", message: message(cause) })
      })
  }
}
