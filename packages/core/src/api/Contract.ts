/**
 * The HTTP API as data: what each route of the description (`Api.ts`) is annotated with and built from.
 * Each resource module (Events, Facts, Projections, Batches, DeadLetters, Runs, Queues, Recovery, Tenants,
 * Webhooks, Alerts, Documents, Health) describes its routes once, as Effect `HttpApiEndpoint`s — method,
 * path, path and query parameters, body, responses and errors as `effect/Schema` — annotated here with the
 * scopes that may call them (`Scopes`), how their body is read (`BodyUsage`) and their summary (`describe`).
 * From that one description @factline/workers serves the routes (`HttpApiBuilder`) and generates the OpenAPI
 * document and the route table, and @factline/client derives its client (`HttpApiClient`).
 *
 * No handler, no binding, nothing of Cloudflare or Hono: the description imports Effect, the schemas and
 * core's failure family (every error response decodes to a member of it), so a browser bundle can carry it.
 *
 * Values (an envelope's payload against its message type, a filter against a projection's columns, a
 * cursor) are validated by the handlers and the core, which know more than a static schema can say; their
 * 400s are documented here and come back as `Problem`s naming each field.
 */
import * as Context from "effect/Context"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import * as SchemaTransformation from "effect/SchemaTransformation"
import type { HttpMethod } from "effect/http"
import type { HttpApiEndpoint } from "effect/http-api"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { Issues } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import { Answered, answerFor, Problem } from "./Problem.js"

/**
 * `events:write`, `read` and `admin` act within the token's tenant; `platform`
 * is for operations across every tenant (a projection rebuild replays all
 * tenants' facts), for the platform's operators only — never give it to a tenant.
 */
export const Scope = Schema.Literals(["events:write", "read", "admin", "platform"])
export type Scope = typeof Scope.Type

/** The platform's queues, as the API's filters name them (core's `RetryPolicy.all`; a test holds the two together). */
export const queueNames = ["factline-events", "factline-projections", "factline-fact-processing", "factline-webhooks", "factline-batch"] as const
/** Where a dead letter comes from: a platform queue, or `factline-workflows` (a workflow instance that failed for good). */
export const deadLetterSources = [...queueNames, "factline-workflows"] as const

/** What the serving and the route table read of an endpoint description, whatever its schemas. */
export interface Endpoint {
  readonly method: string
  readonly path: string
  readonly query: Schema.Top | undefined
  readonly success: ReadonlySet<Schema.Top>
  readonly annotations: Context.Context<never>
}

/**
 * The error responses of an endpoint: one `Problem` per status. On the wire (and in the document) each is
 * `Problem`; to a handler served from the description (Serve.ts) it is a member of the failure family with
 * that status — the type of its error channel — written as a `Problem` by the one writer (`answerFor`).
 */
export const problems = <const S extends ReadonlyArray<number>>(...statuses: S) => statuses.map(problemOf)

const problemOf = (status: number) =>
  Problem.pipe(
    Schema.decodeTo(
      Schema.declare((u: unknown): u is Failure.Failure => Failure.isFailure(u) && u.status === status),
      SchemaTransformation.transform<Failure.Failure, Problem>({ decode: (problem) => Answered.of(status, problem), encode: (failure: Failure.Failure) => answerFor(failure).body })
    ),
    HttpApiSchema.status(status)
  )

/** The scopes that may call an endpoint (any one of them); an endpoint without it is public. */
export class Scopes extends Context.Service<Scopes, readonly [Scope, ...Array<Scope>]>()("@factline/core/api/Scopes") {}

/** How a served route reads its JSON body (Serve.ts): `optional`, no body at all is `{}`; `usage` prefixes a refusal's message. */
export class BodyUsage extends Context.Service<BodyUsage, { readonly optional: boolean; readonly usage: string | undefined }>()("@factline/core/api/BodyUsage") {}

export interface Description {
  readonly summary: string
  /** A JSON body may be left out (read as `{}`). */
  readonly optionalBody?: boolean
  /** What a refused body's message starts with: how to call the route. */
  readonly usage?: string
  readonly description?: string
  /** A token needs one of these; omitted for the public documents. */
  readonly scopes?: readonly [Scope, ...Array<Scope>]
  /** What each error status of the endpoint means (each must be one of its `problems`). */
  readonly errors?: Readonly<Record<number, string>>
  /** Other media types the endpoint answers with, by status (e.g. CloudEvents batches). */
  readonly alsoAnswers?: Readonly<Record<number, Readonly<Record<string, { readonly description: string }>>>>
}

const problemContent = { "application/json": { schema: { $ref: "#/components/schemas/Problem" } } }

/**
 * Annotates an endpoint with its scopes and documentation. The OpenAPI operation gets the bearer
 * requirement with those scopes, the 401 and 403 every authenticated route can answer, and a description
 * per error status.
 */
export const describe = (d: Description) => <
  Identifier extends string,
  Method extends HttpMethod.HttpMethod,
  Path extends string,
  Params extends Schema.Top,
  Query extends Schema.Top,
  Payload extends Schema.Top,
  Headers extends Schema.Top,
  Success extends Schema.Top,
  Error extends Schema.Top,
  Middleware,
  MiddlewareServices
>(
  endpoint: HttpApiEndpoint.HttpApiEndpoint<Identifier, Method, Path, Params, Query, Payload, Headers, Success, Error, Middleware, MiddlewareServices>
) => {
  const secured = d.scopes === undefined ? endpoint : endpoint.annotate(Scopes, d.scopes)
  const scoped = d.optionalBody === undefined && d.usage === undefined ? secured : secured.annotate(BodyUsage, { optional: d.optionalBody === true, usage: d.usage })
  return scoped.annotateMerge(OpenApi.annotations({
    summary: d.summary,
    ...(d.description === undefined ? {} : { description: d.description }),
    transform: (operation: Record<string, any>) => {
      const responses: Record<string, any> = { ...operation.responses }
      for (const [status, text] of Object.entries(d.errors ?? {})) {
        if (responses[status] === undefined) throw new Error(`${endpoint.method} ${endpoint.path}: error ${status} is described but not declared`)
        responses[status] = { ...responses[status], description: text }
      }
      for (const [status, types] of Object.entries(d.alsoAnswers ?? {})) {
        const content = { ...responses[status]?.content }
        for (const [type, { description }] of Object.entries(types)) content[type] = { schema: { type: "array", items: { type: "object" }, description } }
        responses[status] = { ...responses[status], content }
      }
      const parameters = (operation.parameters as Array<Record<string, any>> | undefined)?.map((parameter) => {
        const bounds = parameter.in === "query" ? pageLimitOf(endpoint, parameter.name) : undefined
        return bounds === undefined ? parameter : { ...parameter, schema: pageLimitSchema(bounds) }
      })
      if (d.scopes !== undefined) {
        responses["401"] = { description: "`unauthorized`: no token, or an unknown one (with a `WWW-Authenticate: Bearer` challenge)", content: problemContent }
        responses["403"] = { description: `\`forbidden\`: the token holds none of the scopes ${d.scopes.join(", ")}`, content: problemContent }
        responses["429"] = {
          description: "`rate_limited`: the token's tenant is over its request rate (its tier's limit per 10 s); nothing of the request was read or accepted",
          headers: { "retry-after": { description: "Seconds to wait before sending again", schema: { type: "integer", minimum: 1 } } },
          content: problemContent
        }
      }
      return {
        ...operation,
        ...(parameters === undefined ? {} : { parameters }),
        responses,
        security: d.scopes === undefined ? [] : [{ bearer: [...d.scopes] }],
        ...(d.scopes === undefined ? {} : { "x-factline-scopes": [...d.scopes] })
      }
    }
  }))
}

/** The scopes of an endpoint, or undefined for a public one. */
export const scopesOf = (endpoint: Endpoint) => Option.getOrUndefined(Context.getOption(endpoint.annotations, Scopes))

/**
 * The query parameters an endpoint accepts, from its query schema: `[]` without one; `undefined` when the
 * schema is open (a projection's filters are its columns), and the route names unknown ones itself.
 */
export const queryNames = (endpoint: Endpoint): ReadonlyArray<string> | undefined => {
  if (endpoint.query === undefined) return []
  const ast = endpoint.query.ast
  if (!SchemaAST.isObjects(ast)) return undefined
  return ast.indexSignatures.length > 0 ? undefined : ast.propertySignatures.map((p) => String(p.name))
}

/** A request's query checked against the endpoint's query schema (after its unknown and repeated names were refused): a 400 naming each parameter at fault, or undefined. */
export const queryRefusal = (endpoint: Endpoint): ((params: URLSearchParams) => Failure.InvalidInput | undefined) | undefined => {
  if (endpoint.query === undefined) return undefined
  const decode = Schema.decodeUnknownResult(endpoint.query as Schema.Codec<unknown, unknown>)
  return (params) => {
    // forEach, not Object.fromEntries(params): a browser's DOM typings may not make URLSearchParams iterable.
    const query: Record<string, string> = {}
    params.forEach((value, name) => {
      query[name] = value
    })
    const result = decode(query, { errors: "all" })
    if (Result.isSuccess(result)) return undefined
    const problems = Issues.fromIssue(result.failure.issue)
    return new Failure.InvalidInput({ code: "invalid_query", message: Issues.render(problems), problems: problems })
  }
}

// Reusable field schemas of the documents.

// Optional query parameters are `optionalKey`s: a query string never holds `undefined`, and `optional`'s
// `| undefined` would be documented as a one-branch `anyOf`.

/** A query parameter holding a whole number (query values are strings). */
export const wholeNumber = (description: string) =>
  Schema.optionalKey(Schema.String.check(Schema.isPattern(/^\d+$/u, { message: "must be a whole number" }))).annotate({ description })
/** A query parameter taking one of a few values. */
export const oneOf = <const L extends readonly [string, ...Array<string>]>(values: L, description?: string) =>
  Schema.optionalKey(Schema.Literals(values).annotate({ message: `must be one of ${values.join(", ")}` })).annotate(description === undefined ? {} : { description })
/** An optional text query parameter (a filter). */
export const text = (description: string) => Schema.optionalKey(Schema.String).annotate({ description })

/**
 * The page size a listing accepts and the one it uses without `limit`. A route's bounds are this one value:
 * its `limit` parameter is checked against it before the handler runs (a 400 naming `limit`), the handler
 * reads the page size from it (`pageLimit`), and the OpenAPI document states it as the parameter's
 * `minimum`, `maximum` and `default` (written by `describe`).
 */
export interface PageLimit {
  readonly maximum: number
  readonly default: number
}

const pageLimitKey = "factline/pageLimit"

const pageLimitDescription = (bounds: PageLimit) => `Rows per page: 1 to ${bounds.maximum} (default ${bounds.default})`

/** The `limit` query parameter of a listing: a whole number from 1 to `bounds.maximum`. */
export const limitParameter = (bounds: PageLimit) =>
  Schema.optionalKey(Schema.String.check(Schema.makeFilter(
    (value: string) => /^\d+$/u.test(value) && Number(value) >= 1 && Number(value) <= bounds.maximum,
    { message: `must be a whole number from 1 to ${bounds.maximum}`, [pageLimitKey]: bounds }
  ))).annotate({ description: pageLimitDescription(bounds) })

/** The page size of a request whose `limit` was checked against `bounds` (by its query schema): its value, or the default. */
export const pageLimit = (raw: string | undefined, bounds: PageLimit): number => (raw === undefined ? bounds.default : Number(raw))

/** The bounds of an endpoint's query parameter made with `limit`, if it is one. */
const pageLimitOf = (endpoint: Endpoint, name: string): PageLimit | undefined => {
  const ast = endpoint.query?.ast
  if (ast === undefined || !SchemaAST.isObjects(ast)) return undefined
  const property = ast.propertySignatures.find((p) => p.name === name)
  return property === undefined ? undefined : property.type.checks?.map((check) => check.annotations?.[pageLimitKey] as PageLimit | undefined).find((b) => b !== undefined)
}

/** How the document states a page limit: the integer the query string carries, with its bounds and default. */
const pageLimitSchema = (bounds: PageLimit) => ({
  type: "integer",
  minimum: 1,
  maximum: bounds.maximum,
  default: bounds.default,
  description: pageLimitDescription(bounds)
})
/** A query parameter that must be given, non-empty. */
export const required = (description: string) =>
  Schema.String.check(Schema.isMinLength(1, { message: "is required" })).pipe(Schema.annotateKey({ messageMissingKey: "is required", description }))
/** An opaque keyset cursor from a previous page's `next_cursor`. */
export const cursor = Schema.optionalKey(Schema.String).annotate({ description: "`next_cursor` of the previous page (opaque)" })
export const nextCursor = Schema.NullOr(Schema.String).annotate({ description: "The cursor of the next page, or null on the last page" })
export const Json = Schema.Record(Schema.String, Schema.Unknown)
