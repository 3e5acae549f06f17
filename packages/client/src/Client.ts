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
 * `readProjection`, each encoded and decoded by the endpoint's schemas. Promise-based. It does not
 * upcast what it reads: stored facts were validated when they were appended, and projection rows are what
 * the platform's query API returns.
 */
import * as Result from "effect/Result"
import { Events } from "@factline/core/api"
import type { FactDefinition, MessageDefinition, Projection } from "@factline/core/definitions"
import { type Fact, Issues } from "@factline/schemas"
import * as Api from "./Api.js"
import * as Batcher from "./Batcher.js"
import { InvalidPayload, type Problem, UnexpectedResponse } from "./ClientError.js"

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

/** A stream's facts: typed by the fact definitions asked for, or every fact as stored. */
export type StreamFact<F extends ReadonlyArray<FactDefinition.Any>> = F extends readonly [] ? Fact : FactDefinition.FactOf<F>

export interface StreamPage<F extends ReadonlyArray<FactDefinition.Any>> {
  readonly subject: string
  /** The stream's last sequence number. */
  readonly version: number
  readonly facts: ReadonlyArray<StreamFact<F>>
  /** Pass as `after` for the next page; null on the last one. */
  readonly next_after: number | null
}

export interface StreamOptions<F extends ReadonlyArray<FactDefinition.Any>> {
  /**
   * Only facts of these definitions, typed as their union (`fact.type === "charge"` narrows `fact.data`).
   * The filter is applied to each page the API returns, so a page may hold fewer than `limit` facts.
   */
  readonly types?: F
  /** Facts after this sequence number (default 0: from the start). */
  readonly after?: number
  /** Facts per page read, 1 to 1,000 (the API's default: 100). */
  readonly limit?: number
}

/** A fact as `GET /v1/facts` lists it (its stream as `subject`, no tenant): from the ledger with a subject, else from the D1 facts copy. */
export interface ListedFact<T extends string = string, D = Readonly<Record<string, unknown>>> {
  readonly fact_id: string
  readonly subject: string
  readonly sequence: number
  readonly type: T
  readonly data: D
  readonly causation_id: string
  readonly correlation_id: string
  readonly caused_by: string
  readonly created_at: string
  /** The version of the type's schema `data` is in (the latest the client's definition knows, when one was given). */
  readonly schema_version: number
}

type ListedFactOf<F> = [F] extends [never] ? ListedFact : F extends FactDefinition.FactDefinition<infer T, infer D> ? ListedFact<T, D> : never

export interface FactsOptions<F extends FactDefinition.Any> {
  /** Only facts of this definition, typed. */
  readonly type?: F
  /** Only facts of this stream. */
  readonly subject?: string
  /** `next_cursor` of the previous page. */
  readonly cursor?: string
  /** 1 to 500 (the API's default: 50). */
  readonly limit?: number
}

export interface FactsPage<F> {
  readonly data: ReadonlyArray<ListedFactOf<F>>
  readonly next_cursor: string | null
}

/** A projection's row: typed from its Drizzle table when given the projection, plain JSON when given its name. */
export type ProjectionRow<P> = P extends string ? Readonly<Record<string, unknown>> : Projection.RowOf<P>

/** Filters by column (`?buyer_id=b1`): only the projection's queryable columns are accepted by the API. */
export type Filters<Row> = string extends keyof Row
  ? Readonly<Record<string, string | number | boolean>>
  : { readonly [K in keyof Row]?: Extract<NonNullable<Row[K]>, string | number | boolean> }

export interface ProjectionOptions<P> {
  readonly where?: Filters<ProjectionRow<P>>
  /** `next_cursor` of the previous page. */
  readonly cursor?: string
  /** 1 to 500 (the API's default: 50). */
  readonly limit?: number
}

export interface ProjectionPage<P> {
  readonly projection: string
  readonly data: ReadonlyArray<ProjectionRow<P>>
  readonly next_cursor: string | null
  /** Present while the projection replays the ledger (new to the deployment, or re-versioned): the rows are not complete yet. */
  readonly status?: "catching_up"
  /** Its progress then: the share of the ledger's shards replayed (0 to 1) and when the replay started. */
  readonly catch_up?: { readonly progress: number; readonly since: string | null }
}

export interface Client {
  /**
   * Emits one event of `definition`'s latest version. Resolves once the platform accepted it (its request
   * answered 202), with its own item; rejects with an `EmitError` — `InvalidPayload` before sending,
   * `InvalidEvents` / `IdempotencyConflict` for this event's refusal, `Unauthorized`, `Forbidden`,
   * `Unavailable` after the retries, `UnexpectedResponse`.
   */
  readonly emit: <D extends Emittable>(definition: D, payload: D["Type"], options: EmitOptions) => Promise<Batcher.Emitted>
  /** Sends the emits waiting for their batch now; resolves when every emit made so far has settled. */
  readonly flush: () => Promise<void>
  /** One page of a stream's facts (`GET /v1/streams/:subject/facts`). A stream without facts is `NotFound`. */
  readonly readStream: <const F extends ReadonlyArray<FactDefinition.Any> = readonly []>(subject: string, options?: StreamOptions<F>) => Promise<StreamPage<F>>
  /** Every fact of a stream from `after` on, page after page. */
  readonly streamFacts: <const F extends ReadonlyArray<FactDefinition.Any> = readonly []>(subject: string, options?: StreamOptions<F>) => AsyncGenerator<StreamFact<F>>
  /**
   * One page of the tenant's facts (`GET /v1/facts`), optionally of one type and one stream. Without a stream it
   * reads the platform's D1 facts copy: a `Conflict` (409 `facts_not_copied`) when the copy does not hold the facts
   * asked for (`FACTLINE_FACTS_COPY`).
   */
  readonly readFacts: <F extends FactDefinition.Any = never>(options?: FactsOptions<F>) => Promise<FactsPage<F>>
  /** One page of a projection's rows (`GET /v1/projections/:name`), filtered by queryable columns. */
  readonly readProjection: <P extends Projection.Projection | string>(projection: P, options?: ProjectionOptions<P>) => Promise<ProjectionPage<P>>
  /** Every row of a projection matching the filters, page after page. */
  readonly projectionRows: <P extends Projection.Projection | string>(projection: P, options?: Omit<ProjectionOptions<P>, "cursor">) => AsyncGenerator<ProjectionRow<P>>
}

/** The envelope as `POST /v1/events` describes it (tenant and source are the API's to default), checked strictly. */
const decodeEnvelope = Issues.decodeStrict(Events.Envelope)

/** 128 random bits as hex; `crypto.getRandomValues` also exists where `randomUUID` does not (a page over plain http). */
const messageId = () => `msg_${[...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("")}`

const encoder = new TextEncoder()

/** A query as the wire carries it: each given value as a string, an absent one left out. */
const query = (values: Readonly<Record<string, string | number | boolean | undefined>>): Record<string, string> => {
  const strings: Record<string, string> = {}
  for (const [name, value] of Object.entries(values)) if (value !== undefined) strings[name] = String(value)
  return strings
}

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

  /**
   * A fact in the shape of the client's definition of its type: the platform answers its latest version; a
   * client whose definition is newer upcasts further, and one whose definition is older refuses the fact
   * (its data has fields the client's types do not describe) rather than mistype it.
   */
  const latest = <F extends { readonly fact_id: string; readonly type: string; readonly data: unknown; readonly schema_version?: number | undefined }>(
    definition: FactDefinition.Any | undefined,
    fact: F
  ): F => {
    const version = fact.schema_version ?? 1
    if (definition === undefined || version === definition.latestVersion) return fact
    const upcast = definition.upcast(version, fact.data)
    if (Result.isFailure(upcast)) throw new UnexpectedResponse({ message: `fact ${fact.fact_id}: ${upcast.failure.message}; update the client's fact definitions`, status: 200 })
    return { ...fact, data: upcast.success, schema_version: definition.latestVersion }
  }

  /** A next page that would repeat this one: stop rather than loop. */
  const stalled = (what: string) => new UnexpectedResponse({ message: `${what}: the next page starts where this one did`, status: 200 })

  const readStream: Client["readStream"] = async (subject, options) => {
    const page = await api.facts.readStream({ params: { subject }, query: query({ after: options?.after, limit: options?.limit }) })
    // No definitions (or none listed, which types every fact as stored too): no filter.
    const types = options?.types === undefined || options.types.length === 0 ? undefined : new Map(options.types.map((d) => [d.type, d]))
    const facts = page.facts.filter((f) => types === undefined || types.has(f.type)).map((f) => latest(types?.get(f.type), f))
    return { subject, version: page.version, facts: facts as Array<any>, next_after: page.next_after }
  }

  const streamFacts: Client["streamFacts"] = async function*(subject, options) {
    let after = options?.after
    for (;;) {
      const page = await readStream(subject, { ...options, ...(after === undefined ? {} : { after }) })
      yield* page.facts
      if (page.next_after === null) return
      if (after !== undefined && page.next_after <= after) throw stalled(`GET /v1/streams/${encodeURIComponent(subject)}/facts`)
      after = page.next_after
    }
  }

  const readFacts: Client["readFacts"] = async (options) => {
    const page = await api.facts.listFacts({ query: query({ type: options?.type?.type, subject: options?.subject, cursor: options?.cursor, limit: options?.limit }) })
    return { data: page.data.map((f) => latest(options?.type, f)) as Array<any>, next_cursor: page.next_cursor }
  }

  const readProjection: Client["readProjection"] = async (projection, options) => {
    const name = typeof projection === "string" ? projection : projection.name
    const where = options?.where as Readonly<Record<string, string | number | boolean>> | undefined
    const page = await api.projections.readProjection({ params: { name }, query: query({ ...where, cursor: options?.cursor, limit: options?.limit }) })
    return {
      projection: name, data: page.data as Array<any>, next_cursor: page.next_cursor,
      ...(page.status === undefined ? {} : { status: page.status }),
      ...(page.catch_up === undefined ? {} : { catch_up: { progress: page.catch_up.progress, since: page.catch_up.since } })
    }
  }

  const projectionRows: Client["projectionRows"] = async function*(projection, options) {
    let cursor: string | undefined
    for (;;) {
      const page = await readProjection(projection, { ...options, ...(cursor === undefined ? {} : { cursor }) })
      yield* page.data
      if (page.next_cursor === null) return
      if (page.next_cursor === cursor) throw stalled(`GET /v1/projections/${encodeURIComponent(page.projection)}`)
      cursor = page.next_cursor
    }
  }

  return { emit, flush: batcher.flush, readStream, streamFacts, readFacts, readProjection, projectionRows }
}
