/**
 * Where projections are written and read: D1, through bound statements only.
 *
 * `write` runs a batch's statements in ONE `db.batch()` — one round trip and
 * one transaction for a whole queue batch. If that transaction fails, the
 * batch is written again group by group (`writeEach`: the groups the caller
 * builds only then — one per writer, one per fact) so that one bad writer or
 * fact cannot hold back the others (the slow path only runs on failure). `query` runs one read, its rows decoded
 * by the caller's schema. A missing table (a projection never migrated) is told apart from the store being down
 * by the SQL door's classification (a `Failure.Bug` naming the missing table: `ProjectionNotMigrated`,
 * `isMissingTable`).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { FailureReason } from "@factline/schemas"
import { type Projection, type Sql, tableName, type Value } from "../definitions/Projection.js"
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
  readonly write: (statements: ReadonlyArray<Sql>, isolate: () => ReadonlyArray<Group>) => Effect.Effect<ReadonlyMap<string, Door.SqlFailure>, never, R>
  /** Runs each group (an empty one is skipped) in its own transaction; the failure per group key that failed. */
  readonly writeEach: (groups: ReadonlyArray<Group>) => Effect.Effect<ReadonlyMap<string, Door.SqlFailure>, never, R>
  /** One read, each row decoded by `row`. */
  readonly query: <S extends Door.Row>(row: S, statement: Sql) => Effect.Effect<ReadonlyArray<S["Type"]>, Door.SqlFailure, R>
  /** Runs statements as one transaction (one round trip); all or nothing. */
  readonly execute: (statements: ReadonlyArray<Sql>) => Effect.Effect<void, Door.SqlFailure, R>
}

/** Projections and the facts copy of the tenant(s) in scope: every call runs on the read database the placement scope provides. */
export class ProjectionStore extends Context.Service<ProjectionStore, Shape<Door.ReadDatabase>>()("@factline/core/ProjectionStore") {
  static readonly layer = Layer.sync(ProjectionStore, () => {
    const on = Placement.perDatabase(make)
    const inScope = Effect.map(Effect.service(Door.ReadDatabase), on)
    return {
      write: (statements, isolate) => Effect.flatMap(inScope, (store) => store.write(statements, isolate)),
      writeEach: (groups) => Effect.flatMap(inScope, (store) => store.writeEach(groups)),
      execute: (statements) => Effect.flatMap(inScope, (store) => store.execute(statements)),
      query: (row, statement) => Effect.flatMap(inScope, (store) => store.query(row, statement))
    }
  })
}

export const make = (sql: Door.Sql): Shape => {
  const writeEach = Effect.fn("ProjectionStore.writeEach")(function*(groups: ReadonlyArray<Group>) {
    const failed = new Map<string, Door.SqlFailure>()
    for (const group of groups) {
      if (group.statements.length === 0) continue
      const alone = yield* Effect.result(sql.batch(group.statements))
      if (Result.isFailure(alone)) failed.set(group.key, alone.failure)
    }
    return failed as ReadonlyMap<string, Door.SqlFailure>
  })
  return {
    write: Effect.fn("ProjectionStore.write")(function*(statements, isolate) {
      if (statements.length === 0) return new Map<string, Door.SqlFailure>()
      const together = yield* Effect.result(sql.batch(statements))
      if (Result.isSuccess(together)) return new Map<string, Door.SqlFailure>()
      return yield* writeEach(isolate())
    }),
    writeEach,
    execute: Effect.fn("ProjectionStore.execute")(function*(statements) {
      yield* sql.batch(statements).pipe(Effect.mapError(unavailable))
    }),
    // A generic method: `Effect.fn` would fix its row type, so the span is added with `withSpan`.
    query: (row, statement) =>
      sql.all(row, statement).pipe(Effect.mapError(unavailable), Effect.withSpan("ProjectionStore.query"))
  }
}

/** A projection's values as a read returns them (SQLite has no booleans: they come back as 0 or 1). */
export const Values = Schema.Record(Schema.String, Schema.Union([Schema.String, Schema.Number, Schema.Null]))

/** A failure that is a missing table (the SQL door's classification): a projection whose migration was never applied. */
export const isMissingTable = (error: Door.SqlFailure): boolean => error instanceof Failure.Bug && error.missingTable !== undefined

/** What a projection whose table is missing tells an operator: which table, and how to create it. */
export const notMigratedMessage = (p: Projection) =>
  `projection "${p.name}" is not migrated: its table ${tableName(p)} does not exist in this read database; ` +
  `generate its migration (npm run db:generate) and apply it (wrangler d1 migrations apply)`

/**
 * 503 `projection_not_migrated`: the projection's table does not exist (its migration was never applied).
 * Not the store being down: retrying does not help until an operator applies the migration.
 */
export class ProjectionNotMigrated extends Schema.TaggedError<ProjectionNotMigrated>()("ProjectionNotMigrated", {
  projection: Schema.String,
  table: Schema.String,
  message: Schema.String
}) {
  readonly [Failure.TypeId] = Failure.TypeId
  get status() { return 503 }
  get code() { return "projection_not_migrated" }
  get retryable() { return false }
  get reason(): FailureReason { return "permanent_failure" }
  get publicMessage() { return this.message }
}

/** A read's failure as `ProjectionNotMigrated` when it is a missing table, as itself otherwise. */
export const notMigrated = (p: Projection) => <E extends Door.SqlFailure>(error: E): E | ProjectionNotMigrated =>
  isMissingTable(error) ? new ProjectionNotMigrated({ projection: p.name, table: tableName(p), message: notMigratedMessage(p) }) : error
