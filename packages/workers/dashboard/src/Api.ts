/**
 * The dashboard's calls to the HTTP API, through `Api` of @factline/client — the client derived from the
 * API's own description (`@factline/core/api`, what the Worker serves), which the `factline` command uses
 * too: each call's query, body and answer are encoded and decoded by its endpoint's schemas, and the types
 * below are those schemas' types. This file only adds what the page needs around it: every call sends the
 * session's token to this origin, is never cached nor retried (an error shows at once), and fails with an
 * `ApiError` carrying the API's status, code and message (status 0 for a request refused before sending).
 *
 * A response that arrives after the session changed (sign-out, another sign-in) never settles: nothing of
 * an earlier session reaches the page. A 401 ends the session (`onUnauthorized`) and is dropped the same way.
 */
import { Api, Unauthorized, Unavailable } from "@factline/client"
import type { Batches, DeadLetters, Projections, Queues, Runs, Subjects, Workflows } from "@factline/core/api"
import type * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as Session from "./Session.js"

export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message)
  }
}

/** "401 unauthorized: invalid bearer token", or the message alone for a network failure. */
export const errorText = (error: unknown): string =>
  error instanceof ApiError ? `${error.status ? `${error.status} ${error.code}: ` : ""}${error.message}` : String(error)

let unauthorized: (message: string) => void = () => {}
/** What to do when the API refuses the token (the page signs out with this message). */
export const onUnauthorized = (handler: (message: string) => void): void => {
  unauthorized = handler
}

/** What a response of an earlier session becomes. */
const never = <A>(): Promise<A> => new Promise<A>(() => {})

const noStore: Api.Config["fetch"] = (url, init) => fetch(url, { ...init, cache: "no-store" })
let session: { readonly token: string; readonly api: Api.Api } | undefined
/** The derived client for the session's token (made again when it changes). */
const api = (): Api.Api => {
  const token = Session.token() ?? ""
  if (session?.token !== token) session = { token, api: Api.make({ baseUrl: location.origin, token, fetch: noStore, retry: { maxAttempts: 1 } }) }
  return session.api
}

/** The status and the API's `{ error: { code, message } }` of a refusal (every error the client throws for an answer carries its status and body; one refused before sending, status 0). */
const refusalOf = (error: unknown): { readonly status: number; readonly code: string | undefined; readonly message: string | undefined } | undefined => {
  if (!(error instanceof Error && "status" in error && typeof error.status === "number")) return undefined
  const body = ("body" in error ? error.body : undefined) as { readonly error?: { readonly code?: unknown; readonly message?: unknown } | null } | null | undefined
  const problem = body?.error ?? {}
  return { status: error.status, code: typeof problem.code === "string" ? problem.code : undefined, message: typeof problem.message === "string" ? problem.message : undefined }
}

/** Runs a call in the current session: its answer, or its failure as an ApiError; never settles once the session changed. */
const call = async <A>(request: (api: Api.Api) => Promise<A>): Promise<A> => {
  const generation = Session.currentGeneration()
  let answer: A
  try {
    answer = await request(api())
  } catch (error) {
    if (generation !== Session.currentGeneration()) return never()
    const refusal = refusalOf(error)
    if (error instanceof Unauthorized) {
      unauthorized(`The API refused this token: ${refusal?.message ?? "unauthorized"}. Enter a valid token.`)
      return never()
    }
    // No answer (its one attempt failed: the network, or no answer in time).
    if (error instanceof Unavailable && refusal === undefined) throw new ApiError(0, "network", `cannot reach the API (${error.last || "network error"})`)
    if (refusal === undefined) throw new ApiError(0, "client", error instanceof Error ? error.message : String(error))
    // Without the API's message (a body that is not its error, or a success this page cannot read): the client's.
    throw new ApiError(refusal.status, refusal.code ?? (refusal.status === 0 ? "invalid_request" : `http_${refusal.status}`), refusal.message ?? (error as Error).message)
  }
  if (generation !== Session.currentGeneration()) return never()
  return answer
}

/**
 * The query of endpoint `E` from the page's filters, those left empty not sent. A filter's value is the
 * text of its field (the page offers the description's values): one the endpoint's schema refuses is
 * refused by the client before sending, naming the parameter.
 */
const given = <E extends HttpApiEndpoint.ConstraintRequest>(query: Readonly<Record<string, string | null>>): E["~Query"]["Type"] => {
  const sent: Record<string, string> = {}
  for (const [name, value] of Object.entries(query)) if (value) sent[name] = value
  return sent as E["~Query"]["Type"]
}

// ------------------------------------------------------------------ queue health (GET /v1/queues/health)

export const healthWindows = ["15m", "1h", "6h", "24h"] as const
export type HealthWindow = (typeof healthWindows)[number]

export type Health = Api.Output<typeof Queues.health>
export type QueueHealth = Health["queues"][number]
export type MinutePoint = NonNullable<QueueHealth["series"]>[number]

/** Needs the `platform` scope (a 403 otherwise). */
export const queueHealth = (window: HealthWindow) => call((api) => api.queues.queueHealth({ query: { window } }))

// ------------------------------------------------------------------ dead letters (/v1/dlq)

export interface DeadLetterFilters {
  /** open, replaying, replayed, skipped, escalated; "" for all. */
  readonly status: string
  readonly queue: string
  readonly type: string
  readonly reason: string
}
export type DeadLetter = Api.Output<typeof DeadLetters.listDeadLetters>["data"][number]
export type DeadLetterDetail = Api.Output<typeof DeadLetters.getDeadLetter>

export const deadLetters = (filters: DeadLetterFilters, cursor: string | null) =>
  call((api) => api.deadLetters.listDeadLetters({ query: given<typeof DeadLetters.listDeadLetters>({ status: filters.status, queue: filters.queue, type: filters.type, reason: filters.reason, limit: "50", cursor }) }))
export const deadLetter = (id: string) => call((api) => api.deadLetters.getDeadLetter({ params: { id } }))
/** Sends it back to its queue with the same idempotency key. */
export const replay = (id: string) => call((api) => api.deadLetters.replayDeadLetter({ params: { id } }))
/** Gives its work up; the API appends a reconciliation fact with the reason. */
export const skip = (id: string, reason: string) => call((api) => api.deadLetters.skipDeadLetter({ params: { id }, payload: { reason } }))
export const escalate = (id: string, note: string) => call((api) => api.deadLetters.escalateDeadLetter({ params: { id }, payload: note ? { note } : {} }))
/** Every open dead letter matching the queue, type and reason filters (not the status), in waves. */
export const replayMatching = (filters: DeadLetterFilters) =>
  call((api) => api.deadLetters.replayDeadLetters({ query: given<typeof DeadLetters.replayMatching>({ queue: filters.queue, type: filters.type, reason: filters.reason }) }))

// ------------------------------------------------------------------ batch jobs (GET /v1/batches)

export type BatchJob = Api.Output<typeof Batches.listBatches>["data"][number]

export const batches = (limit: number) => call((api) => api.batches.listBatches({ query: { limit: String(limit) } }))

// ------------------------------------------------------------------ runs (/v1/runs)

export interface RunFilters {
  readonly queue: string
  readonly outcome: string
  readonly type: string
  readonly subject: string
}
export type Run = Api.Output<typeof Runs.listRuns>["data"][number]

export const runs = (filters: RunFilters) =>
  call((api) => api.runs.listRuns({ query: given<typeof Runs.listRuns>({ queue: filters.queue, outcome: filters.outcome, type: filters.type, subject: filters.subject, limit: "50" }) }))
/** Sends a copy of a waiting message to its queue now. */
export const retryRun = (id: string) => call((api) => api.runs.retryRun({ params: { id } }))

// ------------------------------------------------------------------ projections (GET /v1/projections)

export type ProjectionState = Api.Output<typeof Projections.listProjections>["data"][number]

export const projections = () => call((api) => api.projections.listProjections({}))

// ------------------------------------------------------------------ workflow instances (/v1/workflows)

export interface WorkflowFilters {
  readonly workflow: string
  /** queued, running, sleeping, waiting, compensating, complete, failed, terminated; "" for all. */
  readonly status: string
  readonly subject: string
}
export type WorkflowInstance = Api.Output<typeof Workflows.listWorkflows>["data"][number]
export type WorkflowDetail = Api.Output<typeof Workflows.getWorkflow>

export const workflows = (filters: WorkflowFilters, cursor: string | null) =>
  call((api) => api.workflows.listWorkflows({ query: given<typeof Workflows.listWorkflows>({ workflow: filters.workflow, status: filters.status, subject: filters.subject, limit: "50", cursor }) }))
/** One instance: its row, Cloudflare's own status and the facts it appended. */
export const workflow = (id: string) => call((api) => api.workflows.getWorkflow({ params: { id } }))
/** Runs it again from its start (each step with its own idempotency key: nothing done twice). */
export const retryWorkflow = (id: string) => call((api) => api.workflows.retryWorkflow({ params: { id } }))
/** Stops it where it is (no compensation). */
export const terminateWorkflow = (id: string) => call((api) => api.workflows.terminateWorkflow({ params: { id } }))

// ------------------------------------------------------------------ data subjects (/v1/subjects)

export type SubjectErasure = Api.Output<typeof Subjects.getErasure>
/** Starts erasing the data subject's personal data in the token's tenant (the running or finished erasure when there is one). */
export const eraseSubject = (subject: string) => call((api) => api.subjects.eraseSubject({ params: { subject } }))
/** The subject's latest erasure: its phase and report. */
export const subjectErasure = (subject: string) => call((api) => api.subjects.getSubjectErasure({ params: { subject } }))
