/**
 * Every route of a factline platform's HTTP API, as a client derived from the API's own description
 * (`api` of `@factline/core/api`, the value the platform serves): `HttpApiClient.make(api)` encodes each
 * call's path parameters, query and body by the endpoint's schemas and decodes its answer by them, so a
 * route whose schema changes changes this client's types with no other edit. Layered on top: the bearer
 * token, the Transport's retries (429, 5xx, network: the identical request again, so the same idempotency
 * keys) and the typed errors of ClientError. Promise-based; one function per endpoint, by group:
 *
 * ```ts
 * const api = Api.make({ baseUrl: "https://factline.example.com", token })
 * const { data, next_cursor } = await api.deadLetters.listDeadLetters({ query: { queue: "factline-events", limit: "20" } })
 * await api.deadLetters.skipDeadLetter({ params: { id: data[0]!.id }, payload: { reason: "re-filed by support" } })
 * ```
 *
 * A query value is a string, as on the wire (`limit: "20"`); the answer is the success schema's type. A
 * request the endpoint's schemas refuse (a blank skip `reason`, a `limit` that is not a number) is refused
 * here, before anything is sent: `InvalidRequest` (`InvalidQuery` for a GET) with its problems and status 0,
 * as the API would have refused it.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type { Simplify } from "effect/Types"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as HttpClient from "effect/http/HttpClient"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import * as HttpApi from "effect/http-api/HttpApi"
import * as HttpApiClient from "effect/http-api/HttpApiClient"
import type * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import { api, Problem as Described } from "@factline/core/api"
import { Issues } from "@factline/schemas"
import * as Backoff from "./Backoff.js"
import { Conflict, Forbidden, InvalidQuery, InvalidRequest, NotFound, type Problem, type RequestError, Unauthorized, Unavailable, UnexpectedResponse } from "./ClientError.js"
import * as Transport from "./Transport.js"

export interface Config {
  /** The API's origin: `https://factline.example.com` (`http://localhost:8787` with `npm run dev`). */
  readonly baseUrl: string | URL
  /** A bearer token; its tenant is the one written to and read. */
  readonly token: string
  /** Defaults to the global `fetch`. */
  readonly fetch?: Transport.Fetch
  /** Retries of 429, 5xx and network failures. Defaults: 5 attempts, 250 ms doubling up to 30 s. */
  readonly retry?: Partial<Backoff.RetrySettings>
  /** Per attempt. Default 30 s. */
  readonly timeoutMs?: number
}

type Groups = typeof api extends HttpApi.HttpApi<string, infer G> ? G : never

/** What a call of endpoint `E` takes: its path parameters, query, headers and body, each only where it has one. */
export type Input<E extends HttpApiEndpoint.ConstraintRequest> = Simplify<HttpApiEndpoint.ClientRequest<E["~Params"], E["~Query"], E["~Payload"], E["~Headers"], "decoded-only">>
/** What a call of endpoint `E` resolves with: its success schema's type. */
export type Output<E extends HttpApiEndpoint.ConstraintRequest> = HttpApiClient.SuccessType<E["~Success"]>
/** One endpoint's call; it rejects with a `RequestError`. */
export type Call<E extends HttpApiEndpoint.ConstraintRequest> = (request: Input<E>) => Promise<Output<E>>

/** The derived client: `api.<group>.<endpoint>(request)`, for every endpoint of the description. */
export type Api = {
  readonly [G in Groups as G["identifier"]]: G["endpoints"] extends infer Endpoints extends Readonly<Record<string, HttpApiEndpoint.ConstraintRequest>>
    ? { readonly [Id in keyof Endpoints]: Call<Endpoints[Id]> }
    : never
}

export const settings = (config: Config): Transport.Settings => ({
  baseUrl: String(config.baseUrl).replace(/\/+$/, ""),
  token: config.token,
  fetch: config.fetch ?? ((url, init) => globalThis.fetch(url, init)),
  retry: { ...Backoff.defaults, ...config.retry },
  timeoutMs: config.timeoutMs ?? 30_000
})

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The problems of an error's `details`, one per field at fault. */
export const problemsOf = (details: unknown): Array<Problem> =>
  isObject(details) && Array.isArray(details.problems)
    ? details.problems.filter(isObject).map((p) => ({ path: String(p.path ?? ""), message: String(p.message ?? "") }))
    : []

/** The typed error of an answer that is not the route's success: its status and the API's `Problem` body. */
export const refusal = (method: string, what: string, status: number, body: unknown): RequestError => {
  const error = Transport.apiError(body)
  const message = `${what}: ${status}${error.code === undefined ? "" : ` ${error.code}`}${error.message === undefined ? "" : `: ${error.message}`}`
  const common = { message, status, body }
  switch (status) {
    case 400:
      return method === "GET" ? new InvalidQuery({ ...common, problems: problemsOf(error.details) }) : new InvalidRequest({ ...common, problems: problemsOf(error.details) })
    case 401:
      return new Unauthorized(common)
    case 403:
      return new Forbidden(common)
    case 404:
      return new NotFound(common)
    case 409:
      return new Conflict(common)
    default:
      return new UnexpectedResponse({ ...common, ...(error.code === undefined ? {} : { code: error.code }) })
  }
}

/** What went wrong once the request was sent (reading its answer): kept apart from a request refused before sending. */
// A field and an assignment, not a parameter property: `npm run factline` runs these sources with Node's type
// stripping, which refuses parameter properties.
class Answering {
  readonly cause: Cause.Cause<unknown>
  constructor(cause: Cause.Cause<unknown>) {
    this.cause = cause
  }
}

/**
 * A failed call as its typed error: a request the endpoint's schemas refuse (nothing sent), a declared error
 * (decoded by the description to a failure carrying the `Problem`), an undeclared status (its body read),
 * the retries exhausted (`Unavailable`), or an answer the description does not read.
 */
const toClientError = (method: string, what: string, cause: Cause.Cause<unknown>): Effect.Effect<never, RequestError> => {
  const failure = Cause.squash(cause)
  if (!(failure instanceof Answering)) {
    if (Schema.isSchemaError(failure)) {
      const problems = Issues.fromIssue(failure.issue)
      const common = { message: `${what}: refused before sending: ${Issues.render(problems)}; nothing was sent`, status: 0, problems }
      return Effect.fail(method === "GET" ? new InvalidQuery(common) : new InvalidRequest(common))
    }
    return answerError(method, what, failure)
  }
  return answerError(method, what, Cause.squash(failure.cause))
}

const answerError = (method: string, what: string, error: unknown): Effect.Effect<never, RequestError> => {
  if (error instanceof Unavailable) return Effect.fail(error)
  if (error instanceof Described.Answered) {
    const answered = error
    const body = { error: { code: answered.code, message: answered.message, ...(answered.details === undefined ? {} : { details: answered.details }) } }
    return Effect.fail(refusal(method, what, answered.status, body))
  }
  if (Predicate.hasProperty(error, "reason") && Predicate.hasProperty(error.reason, "response")) {
    const response = error.reason.response as { readonly status: number; readonly json: Effect.Effect<unknown, unknown> }
    return Effect.flatMap(Effect.orElseSucceed(response.json, () => undefined), (body) =>
      Effect.fail(response.status >= 200 && response.status < 300
        ? new UnexpectedResponse({ message: `${what}: ${response.status} with a body this client does not read`, status: response.status, body })
        : refusal(method, what, response.status, body)))
  }
  if (Predicate.hasProperty(error, "cause") && error.cause instanceof Unavailable) return Effect.fail(error.cause)
  if (Schema.isSchemaError(error)) return Effect.fail(new UnexpectedResponse({ message: `${what}: an answer this client does not read (${Issues.render(Issues.fromIssue(error.issue))})`, status: 200 }))
  return Effect.fail(new UnexpectedResponse({ message: `${what}: ${error instanceof Error ? error.message : String(error)}`, status: 0 }))
}

export const make = (config: Config): Api => {
  const transport = settings(config)
  const derived = Effect.runSync(
    HttpApiClient.make(api, {
      baseUrl: transport.baseUrl,
      transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(transport.token)),
      // Only the reading of an answer runs here: a schema error outside it is the request's, refused before sending.
      transformResponse: (effect) => Effect.catchCause(effect, (cause) => Effect.fail(new Answering(cause)))
    }).pipe(Effect.provide(FetchHttpClient.layer), Effect.provideService(FetchHttpClient.Fetch, Transport.retrying(transport)))
  ) as unknown as Record<string, Record<string, (request: unknown) => Effect.Effect<unknown, unknown>>>
  const routes = new Map<string, { readonly method: string; readonly path: string }>()
  HttpApi.reflect(api, { onGroup: () => {}, onEndpoint: ({ group, endpoint }) => void routes.set(`${group.identifier}.${endpoint.identifier}`, endpoint) })
  const client: Record<string, Record<string, (request: unknown) => Promise<unknown>>> = {}
  for (const [group, endpoints] of Object.entries(derived)) {
    client[group] = {}
    for (const [name, call] of Object.entries(endpoints)) {
      const { method, path } = routes.get(`${group}.${name}`) ?? { method: "GET", path: `${group}.${name}` }
      client[group][name] = (request) => Effect.runPromise(Effect.catchCause(call(request), (cause) => toClientError(method, `${method} ${path}`, cause)))
    }
  }
  return client as unknown as Api
}
