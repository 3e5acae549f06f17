/**
 * What every route module's handlers share: running an Effect program on the isolate's runtime, reading a
 * JSON body within the limits, and the 503 of an unavailable dependency.
 */
import { Effect } from "effect"
import type { Context } from "hono"
import type { PlatformEnv } from "../Env.js"
import { type ProjectionQuery, ProjectionStore } from "@factline/core"
import type { PlatformRuntime, PlatformServices } from "../Services.js"
import type { AppEnv } from "./Contract.js"
import { errorResponse } from "./Errors.js"
import * as JsonBody from "./JsonBody.js"

export const maxBodyBytes = 5 * 1024 * 1024

export type Ctx = Context<AppEnv>

export type Result<A, E> = { readonly _tag: "Success"; readonly success: A } | { readonly _tag: "Failure"; readonly failure: E }

/** Runs a program on the isolate's runtime; failures are values, never thrown. */
export type Run = <A, E>(env: PlatformEnv, program: Effect.Effect<A, E, PlatformServices>) => Promise<Result<A, E>>

export const makeRun = (runtime: (env: PlatformEnv) => PlatformRuntime): Run => (env, program) => runtime(env).runPromise(Effect.result(program)) as Promise<any>

/** Runs one page query of a read model (projection rows, the facts copy) built by `ProjectionQuery`. */
export const queryPage = (run: Run, env: PlatformEnv, page: ProjectionQuery.Page) =>
  run(env, Effect.flatMap(Effect.service(ProjectionStore.ProjectionStore), (store) => store.query<Record<string, unknown>>(page.sql)))

export type Body = { readonly ok: true; readonly body: unknown } | { readonly ok: false; readonly response: Response }

/** What a JSON route reads. */
export const jsonContentTypes = ["application/json"]

/**
 * Reads a JSON body within `maxBodyBytes` (counted while streaming), or the error response.
 * A body of another content type (`text/plain`, a form, none) is a 415, before anything is read.
 */
export const readBody = async (c: Context<any>, contentTypes: ReadonlyArray<string> = jsonContentTypes): Promise<Body> => {
  const contentType = (c.req.header("content-type") ?? "").split(";")[0]!.trim().toLowerCase()
  if (!contentTypes.includes(contentType)) {
    return {
      ok: false,
      response: errorResponse(
        c,
        415,
        "unsupported_media_type",
        `content-type must be ${contentTypes.join(" or ")}; got ${contentType === "" ? "none" : JSON.stringify(contentType.slice(0, 100))}`
      )
    }
  }
  const read = await JsonBody.read(c.req.raw, maxBodyBytes)
  if (read._tag === "Ok") return { ok: true, body: read.value }
  const { status, code, message, details } = read.refusal
  return { ok: false, response: errorResponse(c, status, code, message, details) }
}

export const unavailable = (c: Context<any>, what: string) => {
  console.error(`${what} is unavailable`)
  return errorResponse(c, 503, "unavailable", `${what} is unavailable, retry later`, undefined, { "retry-after": "5" })
}

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** A whole-number query parameter within bounds, its default when absent, or the message naming the problem. */
export const intParam = (value: string | undefined, name: string, min: number, max: number, fallback: number): number | string => {
  if (value === undefined || value === "") return fallback
  if (!/^\d+$/.test(value)) return `${name} must be a whole number`
  const n = Number(value)
  return n < min || n > max ? `${name} must be between ${min} and ${max}` : n
}
