/**
 * The factline HTTP API written by hand, route by route: each route's method, path, query parameters and
 * body, and how its answer is read. Only the `factline` command of @factline/workers still calls the API
 * through it, until it moves onto `Api` — the client derived from the description, which `Client` and the
 * dashboard use — and this file (with packages/workers/src/Requests.test.ts) is deleted.
 *
 * ```ts
 * const api = Requests.make({ baseUrl: "https://factline.example.com", token })
 * const { data, next_cursor } = await api.listDeadLetters({ query: { queue: "factline-events", limit: 20 } })
 * await api.skipDeadLetter({ params: { id: data[0]!.id }, body: { reason: "re-filed by support" } })
 * ```
 *
 * The routes are the platform's own description (`@factline/core/api`, served as `GET /openapi.json`),
 * written down again here. `packages/workers/src/Requests.test.ts` holds the two together:
 * it fails when a route here — its name, method, path, query parameters, body media type, success status, or
 * a field its answer is read for — is not what the description says.
 *
 * A success is checked against the route's schema (the fields callers use) and returned as the API sent it;
 * any other answer is a typed error (ClientError) carrying the API's status and body. It does not retry
 * (Transport does), build events (Client does) or format anything for a person (the CLI does).
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { Issues } from "@factline/schemas"
import * as Backoff from "./Backoff.js"
import { Conflict, Forbidden, InvalidQuery, InvalidRequest, NotFound, type Problem, type RequestError, Unauthorized, UnexpectedResponse } from "./ClientError.js"
import * as Transport from "./Transport.js"

/** An object with these fields, and whatever else the API sends. */
const open = <const F extends Schema.Struct.Fields>(fields: F) => Schema.StructWithRest(Schema.Struct(fields), [Schema.Record(Schema.String, Schema.Unknown)])
const page = <S extends Schema.Top>(item: S) => open({ data: Schema.Array(item), next_cursor: Schema.NullOr(Schema.String) })
const Json = Schema.Record(Schema.String, Schema.Unknown)
const Nullable = Schema.NullOr(Schema.String)

const Status = Schema.Literals(["ok", "warning", "critical"])
const NullableNumber = Schema.NullOr(Schema.Number)
/** A queue's grade and counters over the window (the description leaves them open: `queues` items take any field). */
export const QueueHealthOfQueue = open({
  queue: Schema.String, status: Status,
  received: Schema.Number, acked: Schema.Number, retried: Schema.Number, dead_lettered: Schema.Number, retry_rate: Schema.Number, dlq_open: Schema.Number,
  depth: NullableNumber, lag_p50_ms: NullableNumber, lag_p99_ms: NullableNumber, processing_p99_ms: NullableNumber,
  checks: Schema.optional(Schema.Record(Schema.String, Schema.String)),
  dlq_by_reason: Schema.optional(Schema.Record(Schema.String, Schema.Number)),
  /** `messages_sent_total` and `dlq_total` by reason over the window. */
  sent: Schema.optional(Schema.Number),
  dead_lettered_by_reason: Schema.optional(Schema.Record(Schema.String, Schema.Number)),
  /** Per minute, oldest first. */
  series: Schema.optional(Schema.Array(open({ minute: Schema.String, received: Schema.Number, lag_p99_ms: NullableNumber, sent: Schema.optional(Schema.Number), depth: Schema.optional(NullableNumber) })))
})
export const QueueHealth = open({
  window: Schema.String, since: Schema.String, status: Status, thresholds: Json,
  queues: Schema.Array(QueueHealthOfQueue),
  ledger: open({ relay_pending_shards: Schema.Number }),
  /** Dead letters spilled to R2 during a D1 outage, not yet moved into the list by the cron (null: R2 could not say). */
  spilled_dead_letters: Schema.optional(NullableNumber)
})
const deadLetter = {
  id: Schema.String, queue: Schema.String, status: Schema.String, reason: Schema.String, last_error: Schema.String, attempts: Schema.Number,
  tenant_id: Nullable, message_type: Nullable, idempotency_key: Nullable, subject: Nullable,
  first_attempted_at: Schema.String, last_attempted_at: Schema.String, received_at: Schema.String,
  resolved_by: Nullable, resolved_at: Nullable, replay_operation_id: Nullable
}
export const DeadLetter = open(deadLetter)
/** One record with its original message and its history: what a read of one, and every action on one, answers. */
const deadLetterDetail = {
  ...deadLetter,
  /** Reason `defect`: the stack of the throw in product code (null otherwise; absent from older deployments). */
  stack: Schema.optional(Nullable),
  original_message: Schema.Unknown,
  history: Schema.Array(open({ at: Schema.String, action: Schema.String, by: Schema.String, note: Schema.optional(Schema.String), operation_id: Schema.optional(Schema.String) }))
}
export const DeadLetterDetail = open(deadLetterDetail)
/** A queue message's attempts: its latest one's outcome (`GET /v1/runs`). */
export const Run = open({
  id: Schema.String, queue: Schema.String, message_id: Schema.String, tenant_id: Nullable, message_type: Nullable, subject: Nullable,
  idempotency_key: Nullable, trace_id: Nullable, attempt: Schema.Number, attempts: Schema.Number, outcome: Schema.String, error: Nullable,
  next_retry_at: Nullable, first_attempted_at: Schema.String, updated_at: Schema.String, can_retry: Schema.Boolean
})
export const RunsPage = open({ data: Schema.Array(Run), next_cursor: Schema.NullOr(Schema.String), recording: Schema.String })
export const ReplayOperation = open({ operation_id: Schema.String, count: Schema.Number, waves: Schema.Number, wave_size: Schema.Number, wave_delay_seconds: Schema.Number })
const job = {
  batch_id: Schema.String, operation: Schema.String, status: Schema.String, tenant_id: Schema.String, offset: Schema.Number,
  total: Schema.NullOr(Schema.Number), succeeded: Schema.Number, failed: Schema.Number, error: Nullable,
  created_at: Schema.String, started_at: Nullable, finished_at: Nullable,
  /** What it was started with (`projection`, `manifest`…; the description leaves it open). A rebuild has none. */
  params: Schema.optional(Json),
  /** An import's first failing lines. */
  errors: Schema.optional(Schema.Array(open({ line: Schema.Number, error: Schema.String })))
}
/** An import, export or reconcile job: what a cancel answers (a rebuild is not cancelled). */
export const Job = open(job)
/** An import, export or reconcile job, or a rebuild (whose progress is in shards, whose `projection` is its own field). */
export const BatchJob = open({ ...job, projection: Schema.optional(Schema.String) })
export const StreamPage = open({
  subject: Schema.String, version: Schema.Number, next_after: Schema.NullOr(Schema.Number),
  facts: Schema.Array(open({ fact_id: Schema.String, sequence: Schema.Number, type: Schema.String, data: Json }))
})
export const FactsPage = page(open({ fact_id: Schema.String, subject: Schema.String, sequence: Schema.Number, type: Schema.String, data: Json }))
/** A page of a projection; `status: "catching_up"` and `catch_up` while it replays the ledger (absent once current). */
export const ProjectionPage = open({
  projection: Schema.String, data: Schema.Array(Json), next_cursor: Nullable,
  status: Schema.optional(Schema.Literal("catching_up")),
  catch_up: Schema.optional(open({ progress: Schema.Number, since: Nullable }))
})
/** A registered projection and its catch-up (`GET /v1/projections`). */
export const ProjectionState = open({
  projection: Schema.String, version: Schema.Number, status: Schema.Literals(["current", "catching_up", "not_migrated", "unchecked"]),
  recorded_version: Schema.NullOr(Schema.Number), detail: Nullable, updated_at: Nullable,
  rebuild: Schema.NullOr(open({
    batch_id: Schema.String, status: Schema.String, shards_done: Schema.Number, shards_total: Schema.Number,
    facts_replayed: Schema.Number, facts_failed: Schema.Number, started_at: Schema.String, finished_at: Nullable
  }))
})
export const Accepted = open({ items: Schema.Array(open({ idempotency_key: Schema.String, duplicate: Schema.Boolean })) })
export const Uploaded = open({ manifest: Schema.String, size: Schema.Number })

/** `POST /v1/events`'s body, `{ "events": [...] }`, from events serialised once (every attempt sends the same bytes). */
export const eventsBody = (events: ReadonlyArray<string>) => `{"events":[${events.join(",")}]}`
/** The size of that body for `count` events whose JSON takes `bytes` bytes (UTF-8) together. */
export const eventsBodyBytes = (count: number, bytes: number) => eventsBody([]).length + bytes + Math.max(0, count - 1)

/** What `POST /v1/batches` starts. */
export type StartBatch =
  | { readonly operation: "import"; readonly events: ReadonlyArray<unknown> }
  | { readonly operation: "import"; readonly manifest: string }
  | { readonly operation: "export"; readonly projection?: string; readonly format?: "ndjson" | "csv" }
  | { readonly operation: "reconcile"; readonly projection: string; readonly repair?: boolean }
  | { readonly operation: "rebuild"; readonly projection: string }

/** Where a tenant's read side lives (`GET /v1/tenants/me`). */
const Placement = open({ tenant_id: Schema.String, read_database: Schema.Int, binding: Schema.String, placed_at: Schema.String, writes_held_since: Nullable })
/** A move of a tenant between read databases. */
/** `POST /v1/recover`: what one call of recovery did (Recovery). */
export const RecoveryReport = open({
  since: Schema.String, dry_run: Schema.Boolean, facts: Schema.Number, relayed: Schema.Number, sends: Schema.Number, handed_over: Schema.Number, shards: Schema.Number,
  events: Schema.NullOr(open({ kept: Schema.Number, decided: Schema.Number, dead_lettered: Schema.Number, resent: Schema.Number })),
  next_cursor: Nullable
})
const TenantMove = open({
  move_id: Schema.String, tenant_id: Schema.String, from_database: Schema.Int, to_database: Schema.Int, phase: Schema.String,
  copy_round: Schema.Int, copied: Schema.Record(Schema.String, Schema.Number), verified: Schema.NullOr(Json), error: Nullable,
  started_at: Schema.String, updated_at: Schema.String, finished_at: Nullable
})

/** A body: a value sent as JSON, JSON text already serialised (the events of an emit batch), or a file streamed. */
export interface Body<B> {
  readonly kind: "json" | "text" | "file"
  readonly contentType: "application/json" | "application/x-ndjson"
  /** The body's type (a type only). */
  readonly Type?: B
}
const json = <B>(): Body<B> => ({ kind: "json", contentType: "application/json" })
const text: Body<string> = { kind: "text", contentType: "application/json" }
/** A streamed file and its length (`content-length` is required). */
export interface File {
  readonly stream: ReadableStream<Uint8Array> | Uint8Array
  readonly length: number
}
const ndjson: Body<File> = { kind: "file", contentType: "application/x-ndjson" }

export type Method = "GET" | "POST" | "PUT" | "DELETE"

export interface Route<P extends string = string, Q extends string = string, B = unknown, R extends Schema.Top | "stream" = Schema.Top | "stream"> {
  readonly method: Method
  /** With `:name` for each path parameter. */
  readonly path: P
  /** The query parameters the route takes, in the order they are sent. */
  readonly query: ReadonlyArray<string>
  /** Whether it takes others too (a projection's columns, as filters). */
  readonly openQuery: boolean
  readonly body: Body<B> | undefined
  /** The status of a success. */
  readonly success: number
  /** The schema a success is read with, or "stream" for a file returned unread. */
  readonly reads: R
}
export type AnyRoute = Route<string, any, any, any>

const route = <const P extends string, const R extends Schema.Top | "stream", const Q extends string = never, B = never>(
  method: Method, path: P, success: number, reads: R,
  options: { readonly query?: ReadonlyArray<Q>; readonly openQuery?: true; readonly body?: Body<B> } = {}
): Route<P, Q, B, R> => ({ method, path, success, reads, query: options.query ?? [], openQuery: options.openQuery ?? false, body: options.body })

/** Every route a client calls, by the description's name for it (its endpoint identifier). */
export const routes = {
  ingest: route("POST", "/v1/events", 202, Accepted, { body: text }),
  readStream: route("GET", "/v1/streams/:subject/facts", 200, StreamPage, { query: ["after", "limit"] }),
  listFacts: route("GET", "/v1/facts", 200, FactsPage, { query: ["type", "subject", "cursor", "limit"] }),
  readProjection: route<"/v1/projections/:name", typeof ProjectionPage, string>("GET", "/v1/projections/:name", 200, ProjectionPage, { query: ["cursor", "limit"], openQuery: true }),
  listProjections: route("GET", "/v1/projections", 200, open({ data: Schema.Array(ProjectionState) })),
  catchUpProjections: route("POST", "/v1/projections/catch-up", 200, open({
    steps: Schema.Array(open({ projection: Schema.String, action: Schema.String, batch_id: Schema.optional(Schema.String), detail: Schema.optional(Schema.String) })),
    data: Schema.Array(ProjectionState)
  })),
  liveness: route("GET", "/health", 200, open({ status: Schema.Literal("ok"), version: Schema.String })),
  queueHealth: route("GET", "/v1/queues/health", 200, QueueHealth, { query: ["window"] }),
  listDeadLetters: route("GET", "/v1/dlq", 200, page(DeadLetter), { query: ["queue", "status", "type", "reason", "cursor", "limit"] }),
  getDeadLetter: route("GET", "/v1/dlq/:id", 200, DeadLetterDetail),
  replayDeadLetter: route("POST", "/v1/dlq/:id/replay", 202, DeadLetterDetail),
  replayDeadLetters: route("POST", "/v1/dlq/replay", 202, ReplayOperation, { query: ["queue", "type", "reason"] }),
  skipDeadLetter: route("POST", "/v1/dlq/:id/skip", 200, open({ ...deadLetterDetail, reconciliation_fact_id: Schema.String }), { body: json<{ readonly reason: string }>() }),
  escalateDeadLetter: route("POST", "/v1/dlq/:id/escalate", 200, DeadLetterDetail, { body: json<{ readonly note?: string }>() }),
  listRuns: route("GET", "/v1/runs", 200, RunsPage, { query: ["queue", "type", "outcome", "subject", "since", "cursor", "limit"] }),
  retryRun: route("POST", "/v1/runs/:id/retry", 202, Run),
  startBatch: route("POST", "/v1/batches", 202, BatchJob, { body: json<StartBatch>() }),
  listBatches: route("GET", "/v1/batches", 200, page(BatchJob), { query: ["status", "cursor", "limit"] }),
  getBatch: route("GET", "/v1/batches/:id", 200, BatchJob),
  cancelBatch: route("POST", "/v1/batches/:id/cancel", 200, Job),
  upload: route("PUT", "/v1/uploads/:name", 201, Uploaded, { body: ndjson }),
  batchOutput: route("GET", "/v1/batches/:id/output", 200, "stream"),
  tenantPlacement: route("GET", "/v1/tenants/me", 200, Placement),
  listPlacements: route("GET", "/v1/tenants", 200, open({ databases: Schema.Array(open({ read_database: Schema.Int, binding: Schema.String, tenants: Schema.Int })), data: Schema.Array(Placement) })),
  placeTenant: route("PUT", "/v1/tenants/:tenant/placement", 200, Placement, { body: json<{ readonly read_database: number }>() }),
  removePlacement: route("DELETE", "/v1/tenants/:tenant/placement", 200, open({ tenant_id: Schema.String, read_database: Schema.Int, outcome: Schema.Literals(["removed", "deleted"]) })),
  moveTenant: route("POST", "/v1/tenants/:tenant/moves", 202, TenantMove, { body: json<{ readonly to_database: number }>() }),
  getTenantMove: route("GET", "/v1/tenants/:tenant/moves/:move_id", 200, TenantMove),
  recover: route("POST", "/v1/recover", 200, RecoveryReport, { body: json<{ readonly since: string; readonly dry_run?: boolean; readonly cursor?: string }>() })
} as const

type Params<P extends string> = P extends `${string}:${infer Name}/${infer Rest}` ? Name | Params<`/${Rest}`> : P extends `${string}:${infer Name}` ? Name : never
type Value = string | number | boolean | undefined

/** What a call of a route takes: its path parameters, its query, its body — each only where it has one. */
export type Input<R extends AnyRoute> = R extends Route<infer P, infer Q, infer B, any>
  ? ([Params<P>] extends [never] ? {} : { readonly params: { readonly [K in Params<P>]: string } })
    & ([Q] extends [never] ? {} : { readonly query?: { readonly [K in Q]?: Value } })
    & ([B] extends [never] ? {} : { readonly body: B })
  : never
/** What a call resolves with: the success's body, typed by the route's schema; a download's stream. */
export type Output<R extends AnyRoute> = R["reads"] extends Schema.Top ? R["reads"]["Type"] : ReadableStream<Uint8Array>

type Call<R extends AnyRoute> = {} extends Input<R> ? (input?: Input<R>) => Promise<Output<R>> : (input: Input<R>) => Promise<Output<R>>

/** One function per route, and `send` for a caller that reads the answer itself. */
export type Api = { readonly [K in keyof typeof routes]: Call<(typeof routes)[K]> } & {
  /** Sends a call and returns its final answer (after the retries) unread: the emit batcher reads its refusals per event. */
  readonly send: <R extends AnyRoute>(route: R, input: Input<R>) => Promise<Transport.Answer>
}

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

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The problems of an error's `details`, one per field at fault. */
export const problemsOf = (details: unknown): Array<Problem> =>
  isObject(details) && Array.isArray(details.problems)
    ? details.problems.filter(isObject).map((p) => ({ path: String(p.path ?? ""), message: String(p.message ?? "") }))
    : []

/** The method, path and query of a call, as sent. */
const target = (route: AnyRoute, input: { readonly params?: Record<string, string>; readonly query?: Record<string, Value> }) => {
  const path = route.path.replace(/:(\w+)/g, (_, name: string) => {
    const value = input.params?.[name]
    if (value === undefined) throw new TypeError(`${route.method} ${route.path} needs the path parameter ${name}`)
    return encodeURIComponent(value)
  })
  const query = new URLSearchParams()
  for (const [name, value] of Object.entries(input.query ?? {})) {
    if (!route.openQuery && !route.query.includes(name)) throw new TypeError(`${route.method} ${route.path} takes no query parameter ${name}`)
    if (value !== undefined) query.set(name, String(value))
  }
  const search = query.toString()
  return search === "" ? path : `${path}?${search}`
}

/** The typed error of an answer that is not the route's success. */
export const refusal = (route: AnyRoute, answer: Transport.Answer, what: string): RequestError => {
  const error = Transport.apiError(answer.body)
  const message = `${what}: ${answer.status}${error.code === undefined ? "" : ` ${error.code}`}${error.message === undefined ? "" : `: ${error.message}`}`
  const common = { message, status: answer.status, body: answer.body }
  switch (answer.status) {
    case 400:
      return route.method === "GET" ? new InvalidQuery({ ...common, problems: problemsOf(error.details) }) : new InvalidRequest({ ...common, problems: problemsOf(error.details) })
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

/** A route's success, checked against its schema and returned as sent; any other answer is its typed error (thrown). */
export const read = <R extends AnyRoute>(route: R, answer: Transport.Answer, what: string): Output<R> => {
  if (answer.status !== route.success) throw refusal(route, answer, what)
  if (route.reads === "stream") return answer.stream as Output<R>
  const checked = Schema.decodeUnknownResult(route.reads as Schema.Codec<unknown, unknown>)(answer.body, { errors: "all" })
  if (Result.isFailure(checked)) {
    throw new UnexpectedResponse({
      message: `${what}: ${answer.status} with a body this client does not read (${Issues.render(Issues.fromIssue(checked.failure.issue))})`,
      status: answer.status,
      body: answer.body
    })
  }
  // As sent: the API's JSON, its keys in its order (`--json` prints it), not a copy rebuilt by the schema.
  return answer.body as Output<R>
}

export const settings = (config: Config): Transport.Settings => ({
  baseUrl: String(config.baseUrl),
  token: config.token,
  fetch: config.fetch ?? ((url, init) => globalThis.fetch(url, init)),
  retry: { ...Backoff.defaults, ...config.retry },
  timeoutMs: config.timeoutMs ?? 30_000
})

export const make = (config: Config): Api => {
  const transport = settings(config)
  const outgoing = (route: AnyRoute, input: any): Transport.Outgoing => ({
    method: route.method,
    path: target(route, input ?? {}),
    ...(route.body === undefined ? {} : { body: route.body.kind === "json" ? JSON.stringify(input.body) : input.body, contentType: route.body.contentType }),
    ...(route.reads === "stream" ? { stream: true } : {})
  })
  const send: Api["send"] = (route, input) => Transport.request(transport, outgoing(route, input))
  const call = async (route: AnyRoute, input: unknown) => {
    const request = outgoing(route, input)
    return read(route, await Transport.request(transport, request), `${request.method} ${request.path}`)
  }
  const api: Record<string, unknown> = { send }
  for (const [name, route] of Object.entries(routes)) api[name] = (input?: unknown) => call(route, input)
  return api as Api
}
