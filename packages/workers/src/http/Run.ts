/**
 * Running a route's Effect program on the isolate's runtime: its value, or its failure thrown for
 * `app.onError` to answer from the failure's class (Problem.ts) — a handler never writes an error response.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { Context } from "hono"
import { Placement, ProjectionQuery, type Sql } from "@factline/core/runtime"
import type { PlatformEnv } from "../Env.js"
import type { PlatformRuntime, PlatformServices } from "../Services.js"
import type { AppEnv } from "./Contract.js"

export type Ctx = Context<AppEnv>

/** Runs a program on the isolate's runtime: its value, or its failure thrown. */
export type Run = <A, E>(env: PlatformEnv, program: Effect.Effect<A, E, PlatformServices>) => Promise<A>

export const makeRun = (runtime: (env: PlatformEnv) => PlatformRuntime): Run => (env, program) =>
  runtime(env).runPromiseExit(program).then((exit) => (Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause))))

/**
 * Runs a program over the caller's read database — its tenant's (Placement): for reads on GET and HEAD, for
 * writes otherwise (held, retryably, while a move takes the tenant's last copy).
 */
export const runTenant = <A, E>(run: Run, c: Ctx, program: Effect.Effect<A, E, PlatformServices | Sql.ReadDatabase>) => {
  const tenantId = c.get("principal").tenantId
  const scoped = c.req.method === "GET" || c.req.method === "HEAD" ? Placement.reading(tenantId) : Placement.writing(tenantId)
  return run(c.env, scoped(program))
}

/** Runs one page query of the caller's read model (projection rows, the facts copy) built by `ProjectionQuery`. */
export const queryPage = (run: Run, c: Ctx, page: ProjectionQuery.Page) =>
  runTenant(run, c, ProjectionQuery.run(page))
