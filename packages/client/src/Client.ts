/**
 * The typed client of a factline platform's HTTP API, for services outside Workers (Node ≥ 22, browsers,
 * any runtime with `fetch`):
 *
 * ```ts
 * const client = Client.make({ baseUrl: "https://factline.example.com", token })
 * await client.emit(CallCompleted, { call_id: "c1", buyer_id: "b1", duration_s: 90, price_cents: 300, currency: "USD" },
 *   { subject: "c1", idempotency_key: "call.completed:c1" })
 * const { facts } = await client.readStream("c1", { types: [Outcome, Charge] })
 * const { data } = await client.readProjection(callsProjection, { where: { buyer_id: "b1" } })
 * ```
 *
 * `emit` takes a message definition (the same one the platform registers) and a payload of its latest
 * version — a wrong payload does not compile — checks payload and envelope with the definition's schema
 * before anything leaves the process, fills the envelope (`schema_version`, `message_type`, a
 * `message_id`, `created_at`), and hands it to the Batcher, which sends emits made close together as one
 * request (retried by the Transport with the same body, so the same idempotency keys). Reads are typed by
 * fact definitions and by a projection's Drizzle table.
 *
 * Every call goes through Api, the client derived from the API's own description (`@factline/core/api`):
 * an emit batch is a call of its `ingest` endpoint, a read one of `readStream`, `listFacts` or
 * `readProjection`, each encoded and decoded by the endpoint's schemas (Reads.ts holds the reads).
 * Promise-based. A fact's `data` is not validated again (stored facts were validated when they were
 * appended; a fact is only upcast to the client's version of its definition), and projection rows are what
 * the platform's query API returns.
 */
import * as Result from "effect/Result"
import { Events } from "@factline/core/api"
import type { MessageDefinition } from "@factline/core/definitions"
import { Issues } from "@factline/schemas"
import * as Api from "./Api.js"
import * as Batcher from "./Batcher.js"
import * as Reads from "./Reads.js"
import { InvalidPayload, type Problem } from "./ClientError.js"

export type { Emitted } from "./Batcher.js"

/** `baseUrl`, `token` (`events:write` to emit, `read` to read), `fetch`, `retry`, `timeoutMs`: see Api.Config. */
export interface Config extends Api.Config {
  /** The envelope's `source` for every emit (the emitting service's name); the API's default is `"http"`. */
  readonly source?: string
  /** Batching of emits. Defaults: up to 1,000 events per request, sent 10 ms after the first. `{ maxEvents: 1 }` sends each alone. */
  readonly batch?: Partial<Batcher.BatchSettings>
}

/** What `emit` needs of a message definition: core's `MessageDefinition` is one. */
export interface Emittable<A = any> {
  readonly messageType: string
  readonly latestVersion: number
  /** The latest version's payload type (a type only). */
  readonly Type: A
  readonly validate: (schemaVersion: number, payload: unknown) => Result.Result<unknown, MessageDefinition.PayloadProblem>
}

/** The envelope fields an emit sets besides the payload. */
export interface EmitOptions {
  /** The entity the event is about (`call_123`): the ledger stream its facts land in. */
  readonly subject: string
  /**
   * The same for this logical event however often it is emitted (a retry, a restart, a replay): the
   * platform accepts an event once per key. Derive it from the event (`call.completed:call_123`).
   */
  readonly idempotency_key: string
  /** When the event happened; defaults to the moment of the `emit` call. */
  readonly created_at?: string | Date
  /** Groups a chain of work; the API's default is the idempotency key. */
  readonly correlation_id?: string
  /** The idempotency key or fact id that caused this event. */
  readonly causation_id?: string
  /** Unique per send (diagnostics only); generated when absent. */
  readonly message_id?: string
  /** Overrides the client's `source` for this event. */
  readonly source?: string
  /**
   * Deliver no sooner than this many seconds after `created_at` (0 to 43,200: Cloudflare Queues' 12 hours). The
   * platform turns it once into the envelope's `deliver_after`; a retry of this emit sends the same body (the same
   * `created_at`), so it never restarts the delay.
   */
  readonly delay_seconds?: number
}

export type { FactsOptions, FactsPage, Filters, ListedFact, ProjectionOptions, ProjectionPage, ProjectionRow, StreamFact, StreamOptions, StreamPage } from "./Reads.js"

/** Emits, and the typed reads (Reads). */
export interface Client extends Reads.Reads {
  /**
   * Emits one event of `definition`'s latest version. Resolves once the platform accepted it (its request
   * answered 202), with its own item; rejects with an `EmitError` — `InvalidPayload` before sending,
   * `InvalidEvents` / `IdempotencyConflict` for this event's refusal, `Unauthorized`, `Forbidden`,
   * `Unavailable` after the retries, `UnexpectedResponse`.
   */
  readonly emit: <D extends Emittable>(definition: D, payload: D["Type"], options: EmitOptions) => Promise<Batcher.Emitted>
  /** Sends the emits waiting for their batch now; resolves when every emit made so far has settled. */
  readonly flush: () => Promise<void>
}

/** The envelope as `POST /v1/events` describes it (tenant and source are the API's to default), checked strictly. */
const decodeEnvelope = Issues.decodeStrict(Events.Envelope)

/** 128 random bits as hex; `crypto.getRandomValues` also exists where `randomUUID` does not (a page over plain http). */
const messageId = () => `msg_${[...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("")}`

const encoder = new TextEncoder()

export const make = (config: Config): Client => {
  const api = Api.make(config)
  const batcher = Batcher.make({ ...Batcher.defaults, ...config.batch }, (events) => api.events.ingest({ headers: {}, payload: { events } as Api.Input<typeof Events.ingest>["payload"] }))

  const emit: Client["emit"] = (definition, payload, options) => {
    const { created_at, source = config.source, ...rest } = options
    const envelope = {
      schema_version: definition.latestVersion,
      message_type: definition.messageType,
      message_id: messageId(),
      ...rest,
      created_at: created_at instanceof Date ? created_at.toISOString() : created_at ?? new Date().toISOString(),
      ...(source === undefined ? {} : { source })
    }
    // Lists joined with concat, not push(...): a spread of 150,000 problems overflows the argument count.
    let problems: Array<Problem> = []
    // The payload is its definition's to check (below); `{}` stands in for it here.
    const checked = decodeEnvelope({ ...envelope, payload: {} })
    if (Result.isFailure(checked)) problems = problems.concat(checked.failure)
    const valid = definition.validate(definition.latestVersion, payload)
    if (Result.isFailure(valid)) {
      const p = valid.failure
      // Told apart by shape: an invalid payload carries its problems, an unsupported version a message
      // (a guard exported by core would make this client load core, and drizzle, at runtime).
      problems = problems.concat("problems" in p ? p.problems : [{ path: "schema_version", message: p.message }])
    }
    const event = { ...envelope, payload }
    let json = ""
    if (problems.length === 0) {
      try {
        json = JSON.stringify(event)
      } catch (error) {
        problems.push({ path: "payload", message: `is not JSON: ${error instanceof Error ? error.message : String(error)}` })
      }
    }
    const bytes = encoder.encode(json).length
    if (problems.length === 0 && Batcher.eventsBodyBytes(1, bytes) > Batcher.maxBodyBytes) {
      problems.push({ path: "", message: `the event is ${bytes} bytes as JSON; a request to the API takes at most ${Batcher.maxBodyBytes}` })
    }
    if (problems.length > 0) {
      return Promise.reject(new InvalidPayload({
        message: `${definition.messageType} ${JSON.stringify(options.idempotency_key)}: ${Issues.render(problems)}; nothing was sent`,
        message_type: definition.messageType,
        idempotency_key: String(options.idempotency_key),
        problems
      }))
    }
    return new Promise((resolve, reject) => batcher.add({ event, bytes, idempotency_key: options.idempotency_key, resolve, reject }))
  }

  return { emit, flush: batcher.flush, ...Reads.make(api) }
}
