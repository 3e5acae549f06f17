/**
 * What every route module's handlers share: running an Effect program on the isolate's runtime (its failure
 * thrown for `app.onError`), and reading a JSON body within the limits.
 */
import { Cause, Effect, Exit } from "effect"
import type { Context } from "hono"
import type { PlatformEnv } from "../Env.js"
import { Failure, type ProjectionQuery, ProjectionStore } from "@factline/core"
import type { PlatformRuntime, PlatformServices } from "../Services.js"
import type { AppEnv } from "./Contract.js"
import * as JsonBody from "./JsonBody.js"
import { RequestRefused } from "./Problem.js"

export const maxBodyBytes = 5 * 1024 * 1024

export type Ctx = Context<AppEnv>

/**
 * Runs a program on the isolate's runtime: its value, or its failure thrown — `app.onError` answers it
 * from the failure's class (Problem.respond), so a handler never writes an error response itself.
 */
export type Run = <A, E>(env: PlatformEnv, program: Effect.Effect<A, E, PlatformServices>) => Promise<A>

export const makeRun = (runtime: (env: PlatformEnv) => PlatformRuntime): Run => (env, program) =>
  runtime(env).runPromiseExit(program).then((exit) => (Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause))))

/** Runs one page query of a read model (projection rows, the facts copy) built by `ProjectionQuery`. */
export const queryPage = (run: Run, env: PlatformEnv, page: ProjectionQuery.Page) =>
  run(env, Effect.flatMap(Effect.service(ProjectionStore.ProjectionStore), (store) => store.query<Record<string, unknown>>(page.sql)))

/** What a JSON route reads. */
export const jsonContentTypes = ["application/json"]

/**
 * Reads a JSON body within `maxBodyBytes` (counted while streaming), or throws why not.
 * A body of another content type (`text/plain`, a form, none) is a 415, before anything is read.
 */
export const readBody = async (c: Context<any>, contentTypes: ReadonlyArray<string> = jsonContentTypes): Promise<unknown> => {
  const contentType = (c.req.header("content-type") ?? "").split(";")[0]!.trim().toLowerCase()
  if (!contentTypes.includes(contentType)) {
    throw new RequestRefused({
      status: 415,
      message: `content-type must be ${contentTypes.join(" or ")}; got ${contentType === "" ? "none" : JSON.stringify(contentType.slice(0, 100))}`
    })
  }
  const read = await JsonBody.read(c.req.raw, maxBodyBytes)
  if (read._tag === "Ok") return read.value
  const { status, code, message, details } = read.refusal
  throw status === 413
    ? new RequestRefused({ status, message })
    : new Failure.InvalidInput({ code, message, ...(details === undefined ? {} : { problems: details.problems }) })
}

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** A whole-number query parameter within bounds, its default when absent, or the message naming the problem. */
export const intParam = (value: string | undefined, name: string, min: number, max: number, fallback: number): number | string => {
  if (value === undefined || value === "") return fallback
  if (!/^\d+$/.test(value)) return `${name} must be a whole number`
  const n = Number(value)
  return n < min || n > max ? `${name} must be between ${min} and ${max}` : n
}
