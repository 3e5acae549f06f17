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
 * It does not build or check events (Client does), does not know the route (Requests does) and does not
 * retry (Transport does).
 */
import { type EmitError, Forbidden, IdempotencyConflict, InvalidEvents, type Problem, Unauthorized, Unavailable, UnexpectedResponse } from "./ClientError.js"
import * as Requests from "./Requests.js"
import { apiError, type Answer } from "./Transport.js"

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

/** One event waiting for its request, serialised once: the bytes every attempt sends. */
export interface Queued {
  readonly json: string
  readonly bytes: number
  readonly idempotency_key: string
  readonly resolve: (emitted: Emitted) => void
  readonly reject: (error: EmitError) => void
}

const what = "POST /v1/events"

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

export interface Batcher {
  readonly add: (event: Queued) => void
  /** Sends what is waiting now; resolves when every request sent so far has settled. */
  readonly flush: () => Promise<void>
}

export const make = (settings: BatchSettings, send: (body: string) => Promise<Answer>): Batcher => {
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
    if (waiting.length > 0 && Requests.eventsBodyBytes(waiting.length + 1, waitingBytes + event.bytes) > maxBodyBytes) sendWaiting()
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
    let answer: Answer
    try {
      answer = await send(Requests.eventsBody(batch.map((e) => e.json)))
    } catch (error) {
      const last = error instanceof Error ? error.message : String(error)
      const failure = error instanceof Unavailable ? error : new Unavailable({ message: `${what}: ${last}`, attempts: 1, last })
      for (const event of batch) event.reject(failure)
      return
    }
    if (answer.status === 202) return accepted(batch, answer)
    const refused = answer.status === 400 ? invalid(batch, answer) : answer.status === 422 ? conflicting(batch, answer) : undefined
    if (refused === undefined) {
      const refusal = Requests.refusal(Requests.routes.ingest, answer, what)
      // A status the emit route does not answer with (404, 409) is no refusal an emit knows.
      const failure = refusal instanceof Unauthorized || refusal instanceof Forbidden || refusal instanceof UnexpectedResponse
        ? refusal
        : new UnexpectedResponse({ message: refusal.message, status: answer.status, body: answer.body })
      for (const event of batch) event.reject(failure)
      return
    }
    const rest = batch.filter((event) => {
      const error = refused.get(event)
      if (error !== undefined) event.reject(error)
      return error === undefined
    })
    if (rest.length > 0) await deliver(rest)
  }

  const accepted = (batch: ReadonlyArray<Queued>, answer: Answer) => {
    let items: typeof Requests.Accepted.Type["items"]
    try {
      items = Requests.read(Requests.routes.ingest, answer, what).items
    } catch (error) {
      for (const event of batch) event.reject(error as UnexpectedResponse)
      return
    }
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
   * A 400's problems by the event they name (`events.<i>.…`, paths made relative to the event). When a
   * problem names no event, every event of the batch fails with all of them: there is no telling whose it is.
   */
  const invalid = (batch: ReadonlyArray<Queued>, answer: Answer): Map<Queued, EmitError> => {
    const error = apiError(answer.body)
    const code = error.code ?? "invalid_request"
    const problems = Requests.problemsOf(error.details)
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
    const reason = error.message ?? "the API refused the request"
    if (unplaced) {
      for (const event of batch) {
        refused.set(event, new InvalidEvents({ message: `${what}: 400 ${code}: ${reason}`, code, idempotency_key: event.idempotency_key, problems }))
      }
      return refused
    }
    for (const [event, own] of byEvent) {
      refused.set(event, new InvalidEvents({
        message: `${event.idempotency_key}: refused by the API (${code}): ${own.map((p) => (p.path === "" ? p.message : `${p.path}: ${p.message}`)).join("; ")}`,
        code,
        idempotency_key: event.idempotency_key,
        problems: own
      }))
    }
    return refused
  }

  /** A 422's conflicts by idempotency key: every event carrying a conflicting key fails; none of the others does. */
  const conflicting = (batch: ReadonlyArray<Queued>, answer: Answer): Map<Queued, EmitError> | undefined => {
    const error = apiError(answer.body)
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

  return { add, flush }
}
