/**
 * Serving from the description: the routes whose groups are implemented with Effect's `HttpApiBuilder`
 * (path, query and payload decoded by the endpoint's own schemas, the answer encoded by its success schema)
 * run as one web handler (`HttpRouter.toWebHandler`) on the isolate's runtime — each request gets the
 * runtime's services and its `env` as its context. `edge` implements the `Edge` middleware every served
 * group takes: URL length, bearer token and scopes, the tenant's rate limit, strict query, the JSON body's
 * limits (JsonBody.ts), and the one problem writer (`answerFor`) for whatever fails — a failure of the
 * family with its status, a refused input as a 400 naming each field, anything else a 500 `internal`.
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Predicate from "effect/Predicate"
import type * as Types from "effect/Types"
import * as HttpApi from "effect/http-api/HttpApi"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import type * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import { HttpApiSchemaError } from "effect/http-api/HttpApiError"
import type * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerError from "effect/http/HttpServerError"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import { Failure } from "@factline/core"
import { Issues } from "@factline/schemas"
import type { PlatformEnv } from "../Env.js"
import type { PlatformRuntime, PlatformServices } from "../Services.js"
import { authenticate, type Principal } from "./Auth.js"
import { BodyUsage, maxUrlBytes, queryNames, queryRefusal, scopesOf } from "./Contract.js"
import { Caller, Edge, PublicEdge, RequestBody, WorkerEnv } from "./Edge.js"
import { readJson } from "./JsonBody.js"
import { answerFor, noSniff, RequestRefused } from "./Problem.js"
import * as RateLimit from "./RateLimit.js"
import { refusal as strictRefusal } from "./StrictQuery.js"

export { Caller, Edge, PublicEdge, WorkerEnv } from "./Edge.js"

/** What the edge checks of one endpoint, read once from its description. */
interface Guard {
  readonly scopes: ReadonlyArray<string>
  readonly known: ReadonlyArray<string> | undefined
  readonly query: ((params: URLSearchParams) => Failure.InvalidInput | undefined) | undefined
  /** Set for an endpoint with a JSON payload: the JSON media types it takes. */
  readonly body: { readonly optional: boolean; readonly usage: string | undefined; readonly types: ReadonlyArray<string> } | undefined
}

const guards = new WeakMap<object, Guard>()
const guardOf = (endpoint: HttpApiEndpoint.Top): Guard => {
  let guard = guards.get(endpoint)
  if (guard === undefined) {
    const usage = Context.getOrUndefined(endpoint.annotations, BodyUsage)
    const types = [...endpoint.payload.keys()].filter((type) => type === "application/json" || type.endsWith("+json"))
    guard = {
      scopes: scopesOf(endpoint) ?? [],
      known: queryNames(endpoint),
      query: queryRefusal(endpoint),
      body: types.length > 0 ? { optional: usage?.optional ?? false, usage: usage?.usage, types } : undefined
    }
    guards.set(endpoint, guard)
  }
  return guard
}

/** A request with no body at all (no length, type or transfer encoding): what an optional body may be. */
const hasNoBody = (request: Request) =>
  (request.headers.get("content-length") ?? "0") === "0" && !request.headers.has("content-type") && !request.headers.has("transfer-encoding")

/**
 * Admits a request as Hono's guards did, in their order: the token and its scopes, the tenant's rate
 * limit (both only when `authenticated`: not for a public route), the query's names then values, the
 * body's media type and limits. Its caller, and the request the handler decodes (its JSON body already
 * read within the limits).
 */
const admit = async (env: PlatformEnv, request: Request, guard: Guard, authenticated: boolean): Promise<{ readonly caller: Principal | undefined; readonly request: Request | undefined; readonly body?: unknown }> => {
  const caller = authenticated ? await authenticate(env, request.headers.get("authorization") ?? undefined, guard.scopes as Parameters<typeof authenticate>[2]) : undefined
  if (caller !== undefined) await RateLimit.check(env, caller.tenantId)
  const params = new URL(request.url).searchParams
  const refused = strictRefusal(params, guard.known) ?? guard.query?.(params)
  if (refused !== undefined) throw refused
  if (guard.body === undefined) return { caller, request: undefined }
  const empty = guard.body.optional && hasNoBody(request)
  const value = empty ? {} : await readJson(request, guard.body.types)
  const headers = new Headers(request.headers)
  // The media type the body was read as (its parameters dropped: the body is re-encoded as UTF-8 JSON).
  headers.set("content-type", empty ? "application/json" : (request.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase())
  headers.delete("content-length")
  // The handler that decodes by schema reads this request; a raw one takes the value itself (`RequestBody`), so
  // the JSON is written again only when it is read.
  const text = new ReadableStream<Uint8Array>({
    pull(controller) {
      controller.enqueue(new TextEncoder().encode(JSON.stringify(value)))
      controller.close()
    }
  })
  return { caller, body: value, request: new Request(request.url, { method: request.method, headers, body: text, duplex: "half" } as RequestInit) }
}

/** An input the endpoint's schemas refused: a 400 naming each field (`invalid_query` for the query string). */
const refusedInput = (error: HttpApiSchemaError, usage: string | undefined): unknown => {
  const problems = Issues.fromIssue(error.cause.issue)
  const message = Issues.render(problems)
  if (error.kind === "Query") return new Failure.InvalidInput({ code: "invalid_query", message, problems })
  // The usage is how to write the body: it prefixes a refused payload's message, not a refused path's.
  if (error.kind === "Params") return new Failure.InvalidInput({ message, problems })
  if (error.kind === "Headers") {
    // A header's problem names it as `headers.<name>`; the message says "the <name> header …".
    const named = problems.map((p) => ({ ...p, path: `headers.${p.path}` }))
    return new Failure.InvalidInput({ message: problems.map((p) => `the ${p.path} header ${p.message}`).join("; "), problems: named })
  }
  if (error.kind === "Payload") return new Failure.InvalidInput({ message: usage === undefined ? message : `${usage}: ${message}`, problems })
  // A success the handler built that its schema refuses is the handler's bug: a 500 `internal`.
  return error
}

const problem = (error: unknown, headers: Readonly<Record<string, string>> = {}) => {
  const answer = answerFor(error)
  return HttpServerResponse.jsonUnsafe(answer.body, { status: answer.status, headers: { ...answer.headers, ...headers } })
}

const noStore = { "cache-control": "no-store" }

/** A security middleware sees its handler's failure wrapped (HttpApiBuilder's `HandlerError`): the failure itself. */
const unwrap = (error: unknown): unknown =>
  Predicate.hasProperty(error, "~effect/http-api/HttpApiBuilder/HandlerError") && Predicate.hasProperty(error, "error") ? error.error : error

/** A served route's guards around its handler, and the one writer for its failures; with a token, its `Caller`. */
const guarded = (handler: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, any>, endpoint: HttpApiEndpoint.Top, authenticated: boolean) =>
  Effect.gen(function*() {
    const request = (yield* HttpServerRequest.HttpServerRequest).source as Request
    if (request.url.length > maxUrlBytes) return problem(new RequestRefused({ status: 414, message: `the URL is over ${maxUrlBytes} bytes` }))
    const env = yield* WorkerEnv
    const guard = guardOf(endpoint)
    const answered = Effect.gen(function*() {
      const admitted = yield* Effect.tryPromise({ try: () => admit(env, request, guard, authenticated), catch: (error) => error })
      const served = admitted.request === undefined
        ? handler
        : handler.pipe(
          Effect.provideService(HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(admitted.request)),
          Effect.provideService(RequestBody, admitted.body)
        )
      const response = yield* (admitted.caller === undefined ? served : Effect.provideService(served, Caller, admitted.caller))
      // Never cached unless the handler says otherwise (the public documents are).
      return HttpServerResponse.setHeaders(response, response.headers["cache-control"] === undefined ? { ...noSniff, ...noStore } : noSniff)
    })
    return yield* Effect.catchCause(answered, (cause) => {
      const error = unwrap(Cause.squash(cause))
      return Effect.succeed(problem(HttpApiSchemaError.is(error) ? refusedInput(error, guard.body?.usage) : error, noStore))
    })
  })

/** The `Edge` middleware: every authenticated served route's guards around its handler, and the one writer for its failures. */
export const edge = Layer.succeed(Edge)({ bearer: (handler, { endpoint }) => guarded(handler, endpoint, true) as any })

/** The `PublicEdge` middleware: the same guards but the token and the rate limit, for the routes without scopes. */
export const publicEdge = Layer.succeed(PublicEdge)((handler, { endpoint }) => guarded(handler, endpoint, false) as any)

/** The per-request services of a served route: the isolate runtime's, and the Worker's `env`. */
export type Services = PlatformServices | WorkerEnv

/**
 * A request no route matches: a 404 `not_found` naming its method and path (a URL over `maxUrlBytes` is a 414 first),
 * written by the one problem writer — the router's own answer would be an empty 404.
 */
const notFound = HttpRouter.middleware<{ handles: HttpServerError.HttpServerError }>()((effect) =>
  Effect.catchTag(effect, "HttpServerError", (error) =>
    Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
      const url = (request.source as Request).url
      if (!(error.reason instanceof HttpServerError.RouteNotFound)) return problem(error, noSniff)
      return problem(url.length > maxUrlBytes
        ? new RequestRefused({ status: 414, message: `the URL is over ${maxUrlBytes} bytes` })
        : new Failure.NotFound({ message: `no route for ${request.method} ${new URL(url).pathname}` }), noSniff)
    })) as Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled, HttpServerRequest.HttpServerRequest>, { global: true })

/**
 * The Worker's HTTP entry: the web handler of `api` (every group, each implemented by a layer of `groups`), each
 * request run with the isolate runtime's services and its `env`.
 *
 * `HttpApiBuilder.layer` declares `FileSystem`, `Path`, `Etag.Generator` and `HttpPlatform` as requirements, for
 * multipart payloads written to disk and file responses; no endpoint here has either (JSON in and out; the
 * streamed uploads are raw handlers), so none is provided and a use of one would fail the request as a 500
 * ("Service not found"). `HttpServer.layerServices` would provide them at +8.5 KiB gzip (its MIME table, Path,
 * FileSystem), measured.
 */
export const make = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  groups: Layer.Layer<HttpApiGroup.ToService<Id, Groups>, never, any>,
  runtime: (env: PlatformEnv) => PlatformRuntime
) => {
  const { handler } = HttpRouter.toWebHandler(
    Layer.merge(HttpApiBuilder.layer(api).pipe(Layer.provide(groups), Layer.provide(Layer.merge(edge, publicEdge))), notFound) as Layer.Layer<never, never, HttpRouter.HttpRouter>,
    // A path parameter of any length is the edge's to answer (414 over maxUrlBytes, else the handler's 404), not a
    // routing miss (find-my-way's default stops at 100 characters).
    { disableLogger: true, routerConfig: { maxParamLength: Number.POSITIVE_INFINITY } }
  )
  return {
    fetch: async (request: Request, env: PlatformEnv): Promise<Response> => {
      const context = Context.add(await runtime(env).context(), WorkerEnv, env)
      return (handler as (request: Request, context: Context.Context<Services>) => Promise<Response>)(request, context)
    }
  }
}
