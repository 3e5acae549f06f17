/**
 * The one error shape of the HTTP API, `Problem` (`{ error: { code, message, details? } }`), the failures
 * only the HTTP edge raises (authentication, media types, sizes), `Answered` (a `Problem` as a client decodes
 * it) and `answerFor`: what the API answers for a failure — its status, body and headers, from the failure's
 * class (`status`, `code`, whether a retry may help). Part of the description (`@factline/core/api`), so the
 * server writes and the derived client reads one shape; the server's writers of a response are in
 * @factline/workers (http/Problem.ts).
 *
 * A 5xx names only the service at fault (`the ledger is unavailable, retry later`) with `retry-after`; the
 * driver's text goes to the log. Anything outside the family is a 500 `internal` that says nothing more.
 * A `details.problems` list, however long the failure's, is written as its first 100 with `problems_total`
 * (`Issues.listed`): an error body stays small whatever the request held.
 */
import * as Schema from "effect/Schema"
import * as Failure from "../failures/Failure.js"
import { Issues } from "@factline/schemas"

/** `details`: most often the fields at fault (capped, with their total); some failures add their own fields, or are a list. */
const Details = Schema.Union([
  Schema.StructWithRest(Schema.Struct({
    problems: Schema.optional(Schema.Array(Failure.Problem)).annotate({
      description: `One entry per field at fault: the first ${Issues.maxListed}, each path and message cut at ${Issues.maxProblemChars} characters`
    }),
    problems_total: Schema.optional(Schema.Int).annotate({ description: "How many problems there are in all (`problems` lists the first 100); given with `problems`" })
  }), [Schema.Record(Schema.String, Schema.Unknown)]),
  Schema.Array(Schema.Unknown)
]).annotate({ description: "Where given, e.g. `{ problems: [{ path, message }], problems_total }`; a 422 `idempotency_conflict` lists the conflicting keys" })

export const Problem = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String.annotate({
      description: "Machine-readable: invalid_request, invalid_query, invalid_events, unauthorized, forbidden, not_found, conflict, not_acceptable, unsupported_media_type, length_required, payload_too_large, uri_too_long, too_deep, too_many_events, idempotency_conflict, rate_limited, unavailable, internal"
    }),
    message: Schema.String.annotate({ description: "For a person: names every problem. Never a stack, SQL text or a secret." }),
    details: Schema.optional(Details)
  })
}).annotate({
  identifier: "Problem",
  description: "Every error of the API: a 4xx names what to fix; a 429 and a 503 carry `retry-after`; a 500 says only `internal`.",
  examples: [{ error: { code: "invalid_query", message: "limit: must be a whole number from 1 to 500", details: { problems: [{ path: "limit", message: "must be a whole number from 1 to 500" }], problems_total: 1 } } }]
})
export type Problem = typeof Problem.Type

const Problems = Schema.optional(Schema.Array(Failure.Problem))

/** 401: no bearer token, or one the platform does not know; answered with a `WWW-Authenticate: Bearer` challenge. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", { message: Schema.String }) implements Failure.Failure {
  readonly [Failure.TypeId] = Failure.TypeId
  get status() { return 401 }
  get code() { return "unauthorized" }
  get retryable() { return false }
  get reason() { return "permanent_failure" as const }
  get publicMessage() { return this.message }
}

/** 403: the token is valid but may not do this (a scope it lacks, another tenant's data). */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", { message: Schema.String, problems: Problems }) implements Failure.Failure {
  readonly [Failure.TypeId] = Failure.TypeId
  get status() { return 403 }
  get code() { return "forbidden" }
  get retryable() { return false }
  get reason() { return "permanent_failure" as const }
  get publicMessage() { return this.message }
  get details() { return this.problems === undefined ? undefined : { problems: this.problems } }
}

/**
 * 429: the token's tenant is over its request rate (RateLimit.ts); nothing of the request was read or
 * accepted. Retryable: `retry-after` is the limiter's period, after which the tenant's window has passed.
 */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  message: Schema.String,
  retryAfterSeconds: Schema.Number
}) implements Failure.Failure {
  readonly [Failure.TypeId] = Failure.TypeId
  get status() { return 429 }
  get code() { return "rate_limited" }
  get retryable() { return true }
  get reason() { return "retries_exhausted" as const }
  get publicMessage() { return this.message }
}

/** 406, 411, 413, 414, 415: the request's framing is refused before its content is read (or any is written). */
export class RequestRefused extends Schema.TaggedError<RequestRefused>()("RequestRefused", {
  status: Schema.Literals([406, 411, 413, 414, 415]),
  message: Schema.String
}) implements Failure.Failure {
  readonly [Failure.TypeId] = Failure.TypeId
  get code() {
    return this.status === 406 ? "not_acceptable" : this.status === 411 ? "length_required" : this.status === 413 ? "payload_too_large" : this.status === 414 ? "uri_too_long" : "unsupported_media_type"
  }
  get retryable() { return false }
  get reason() { return "permanent_failure" as const }
  get publicMessage() { return this.message }
}

/** A `Problem` an API answered with, as a client decodes it: its status, code, message and details as sent. */
export class Answered extends Schema.TaggedError<Answered>()("Answered", {
  status: Schema.Number,
  code: Schema.String,
  message: Schema.String,
  details: Schema.optional(Schema.Unknown)
}) implements Failure.Failure {
  readonly [Failure.TypeId] = Failure.TypeId
  static of(status: number, problem: Problem) {
    return new Answered({ status, ...problem.error })
  }
  get retryable() { return this.status === 429 || this.status >= 500 }
  get reason() { return this.retryable ? "retries_exhausted" as const : "permanent_failure" as const }
  get publicMessage() { return this.message }
}

/**
 * Every answer of the API, errors included, is JSON (or a download) that a browser must not sniff into a page:
 * `x-content-type-options: nosniff` on each (the static pages get it from their _headers file).
 */
export const noSniff = { "x-content-type-options": "nosniff" } as const

const body = (code: string, message: string, details: unknown): Problem =>
  ({ error: typeof details !== "object" || details === null ? { code, message } : { code, message, details: listed(details) } })

/** `details` with its `problems` (if any) as the first `Issues.maxListed` and their total. */
const listed = (details: object): NonNullable<Problem["error"]["details"]> =>
  Array.isArray(details)
    ? details
    : "problems" in details && Array.isArray(details.problems)
      ? { ...details, ...Issues.listed(details.problems) }
      : { ...details }

/** What the API answers for a failure: its status, its `Problem` body and its headers. */
export interface Answer {
  readonly status: number
  readonly body: Problem
  readonly headers: Readonly<Record<string, string>>
}

/**
 * The answer for a failure: its status, code, public message and details from its class; `retry-after`
 * on a retryable one, the bearer challenge on a 401. Anything else is logged by name and answered 500.
 * The one place an error response is decided, whichever router serves the route.
 */
export const answerFor = (error: unknown): Answer => {
  if (!Failure.isFailure(error)) {
    console.error(`unhandled error: ${error instanceof Error ? error.name : "unknown"}`)
    return { status: 500, body: body("internal", "internal error", undefined), headers: noSniff }
  }
  const headers: Record<string, string> = { ...noSniff }
  if (error.retryable) headers["retry-after"] = String(error.retryAfterSeconds ?? 5)
  if (error.status === 401) headers["www-authenticate"] = "Bearer"
  if (error.status >= 500) console.error(`${error._tag}: ${error.publicMessage} (${error.message.slice(0, 300)})`)
  return { status: error.status, body: body(error.code, error.publicMessage, error.details), headers }
}
