/**
 * Emits made close together travel as one `POST /v1/events` with `{ "events": [...] }`: a batch is sent when
 * it holds `maxEvents` events, when the next event would take its body past the API's 5 MiB, or
 * `maxDelayMs` after its first event — whichever comes first — and at once on `flush()`.
 *
 * The answer is split back per event: a 202 resolves each emit with its own item; a 400 or 422 that names
 * events (`events.3.payload.duration_s`, a conflicting idempotency key) fails exactly those emits, and —
 * the API having accepted none of the request — the others are sent again without them. Anything else
 * (401, 403, retries exhausted) fails every emit of the batch. No emit is left unsettled.
 *
 * It does not build or check events (Client does) and does not retry (the Transport does): a batch is one
 * call of the description's `ingest` endpoint through the derived client (Api), whose typed errors carry
 * the API's status and `Problem` body, read here per event.
 */
import type { Events } from "@factline/core/api"
import type * as Api from "./Api.js"
import { type EmitError, Forbidden, IdempotencyConflict, InvalidEvents, InvalidRequest, type Problem, type RequestError, Unauthorized, Unavailable, UnexpectedResponse } from "./ClientError.js"
import { apiError } from "./Transport.js"

/** What the `ingest` endpoint answers with a 202: an item per event, in order. */
export type Accepted = Api.Output<typeof Events.ingest>

/** The API's limits on one request (packages/workers `maxEventsPerRequest`, `maxBodyBytes`). */
export const maxEventsPerRequest = 1_000
export const maxBodyBytes = 5 * 1024 * 1024

export interface BatchSettings {
  /** Events per request, at most 1,000. */
  readonly maxEvents: number
  /** How long the first event of a batch waits for others. */
  readonly maxDelayMs: number
}

export const defaults: BatchSettings = { maxEvents: maxEventsPerRequest, maxDelayMs: 10 }

/** What an accepted emit resolves with: the API's item for it. */
export interface Emitted {
  readonly idempotency_key: string
  /**
   * The key had been accepted before with this payload: by an earlier emit, or by an earlier attempt of this
   * one whose answer was lost. Either way the event is accepted once.
   */
  readonly duplicate: boolean
}

/** `{ "events": [...] }`'s size for `count` events whose JSON takes `bytes` bytes (UTF-8) together. */
export const eventsBodyBytes = (count: number, bytes: number) => '{"events":[]}'.length + bytes + Math.max(0, count - 1)

/** One event waiting for its request, checked by the Client; `bytes` is its size as JSON. */
export interface Queued {
  readonly event: Readonly<Record<string, unknown>>
  readonly bytes: number
  readonly idempotency_key: string
  readonly resolve: (emitted: Emitted) => void
  readonly reject: (error: EmitError) => void
}

const what = "POST /v1/events"

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A typed error read from an answer (it carries the answer's status and body). */
const isAnswered = (error: unknown): error is RequestError & { readonly status: number; readonly body?: unknown } =>
  error instanceof Error && "status" in error && typeof error.status === "number"

const accepted = (batch: ReadonlyArray<Queued>, answer: Accepted) => {
  const items = answer.items
  batch.forEach((event, index) => {
    const item = items[index]
    if (item !== undefined && item.idempotency_key === event.idempotency_key) {
      event.resolve({ idempotency_key: event.idempotency_key, duplicate: item.duplicate })
    } else {
      event.reject(new UnexpectedResponse({
        message: `${what} answered 202 (accepted) without an item for ${JSON.stringify(event.idempotency_key)} at position ${index}: the event was accepted, the answer is not what this client reads`,
        status: 202
      }))
    }
  })
}

/**
 * A 400's problems (or those of a request refused before sending) by the event they name (`events.<i>.…`, paths made relative to the event). When a
 * problem names no event, every event of the batch fails with all of them: there is no telling whose it is.
 */
const invalid = (batch: ReadonlyArray<Queued>, code: string, reason: string, problems: ReadonlyArray<Problem>, by: string): Map<Queued, EmitError> => {
  const byEvent = new Map<Queued, Array<Problem>>()
  let unplaced = problems.length === 0
  for (const problem of problems) {
    const match = /^events\.(\d+)(?:\.(.*))?$/.exec(problem.path)
    const event = match === null ? undefined : batch[Number(match[1])]
    if (event === undefined) {
      unplaced = true
      continue
    }
    byEvent.set(event, [...(byEvent.get(event) ?? []), { path: match![2] ?? "", message: problem.message }])
  }
  const refused = new Map<Queued, EmitError>()
  if (unplaced) {
    for (const event of batch) {
      refused.set(event, new InvalidEvents({ message: reason.startsWith(what) ? reason : `${what}: 400 ${code}: ${reason}`, code, idempotency_key: event.idempotency_key, problems: [...problems] }))
    }
    return refused
  }
  for (const [event, own] of byEvent) {
    refused.set(event, new InvalidEvents({
      message: `${event.idempotency_key}: ${by} (${code}): ${own.map((p) => (p.path === "" ? p.message : `${p.path}: ${p.message}`)).join("; ")}`,
      code,
      idempotency_key: event.idempotency_key,
      problems: own
    }))
  }
  return refused
}

/** A 422's conflicts by idempotency key: every event carrying a conflicting key fails; none of the others does. */
const conflicting = (batch: ReadonlyArray<Queued>, body: unknown): Map<Queued, EmitError> | undefined => {
  const error = apiError(body)
  if (error.code !== "idempotency_conflict" || !Array.isArray(error.details)) return undefined
  const reasons = new Map<string, string>()
  for (const conflict of error.details.filter(isObject)) {
    if (typeof conflict.idempotency_key === "string") reasons.set(conflict.idempotency_key, String(conflict.reason ?? "accepted_before"))
  }
  const refused = new Map<Queued, EmitError>()
  for (const event of batch) {
    const reason = reasons.get(event.idempotency_key)
    if (reason === undefined) continue
    refused.set(event, new IdempotencyConflict({
      message: reason === "within_request"
        ? `${event.idempotency_key}: emitted twice in one batch with different payloads; neither was accepted`
        : `${event.idempotency_key}: accepted before with another payload; this one was not accepted`,
      idempotency_key: event.idempotency_key,
      reason
    }))
  }
  // A conflict naming none of these keys cannot be placed: fail them all rather than resend forever.
  return refused.size > 0 ? refused : undefined
}

/** A 400 (or a request refused before sending) and a 422 name the events at fault: those fail, the others go again. */
const refusalOf = (batch: ReadonlyArray<Queued>, error: unknown): Map<Queued, EmitError> | undefined => {
  if (error instanceof InvalidRequest) {
    const { code, message } = apiError(error.body)
    return invalid(batch, code ?? "invalid_request", message ?? error.message, error.problems, error.status === 0 ? "refused before sending" : "refused by the API")
  }
  if (error instanceof UnexpectedResponse && error.status === 422) return conflicting(batch, error.body)
  return undefined
}

/** What every emit of a batch fails with when the answer names none of them. */
const failureOf = (error: unknown): EmitError => {
  if (error instanceof Unavailable || error instanceof Unauthorized || error instanceof Forbidden || error instanceof UnexpectedResponse) return error
  const last = error instanceof Error ? error.message : String(error)
  // A status the emit route does not answer with (404, 409) is no refusal an emit knows.
  return isAnswered(error)
    ? new UnexpectedResponse({ message: error.message, status: error.status, body: error.body })
    : new Unavailable({ message: `${what}: ${last}`, attempts: 1, last })
}

export interface Batcher {
  readonly add: (event: Queued) => void
  /** Sends what is waiting now; resolves when every request sent so far has settled. */
  readonly flush: () => Promise<void>
}

/** Sends one batch's events (`POST /v1/events` with `{ "events": [...] }`); rejects with the call's typed error. */
export type Send = (events: ReadonlyArray<Readonly<Record<string, unknown>>>) => Promise<Accepted>

export const make = (settings: BatchSettings, send: Send): Batcher => {
  const maxEvents = Math.min(Math.max(1, Math.floor(settings.maxEvents)), maxEventsPerRequest)
  let waiting: Array<Queued> = []
  let waitingBytes = 0
  let timer: ReturnType<typeof setTimeout> | undefined
  const inFlight = new Set<Promise<void>>()

  const sendWaiting = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
    if (waiting.length === 0) return
    const batch = waiting
    waiting = []
    waitingBytes = 0
    const delivery: Promise<void> = deliver(batch).finally(() => inFlight.delete(delivery))
    inFlight.add(delivery)
  }

  const add = (event: Queued) => {
    if (waiting.length > 0 && eventsBodyBytes(waiting.length + 1, waitingBytes + event.bytes) > maxBodyBytes) sendWaiting()
    waiting.push(event)
    waitingBytes += event.bytes
    if (waiting.length >= maxEvents) sendWaiting()
    else if (timer === undefined) timer = setTimeout(sendWaiting, settings.maxDelayMs)
  }

  const flush = async () => {
    sendWaiting()
    while (inFlight.size > 0) await Promise.allSettled([...inFlight])
  }

  /** Sends a batch and settles every one of its emits; never rejects. */
  const deliver = async (batch: ReadonlyArray<Queued>): Promise<void> => {
    let answer: Accepted
    try {
      answer = await send(batch.map((e) => e.event))
    } catch (error) {
      const refused = refusalOf(batch, error)
      if (refused === undefined) {
        for (const event of batch) event.reject(failureOf(error))
        return
      }
      const rest = batch.filter((event) => {
        const failure = refused.get(event)
        if (failure !== undefined) event.reject(failure)
        return failure === undefined
      })
      if (rest.length > 0) await deliver(rest)
      return
    }
    accepted(batch, answer)
  }

  return { add, flush }
}
