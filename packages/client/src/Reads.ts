/**
 * The typed reads of `Client`: a stream's facts, the tenant's facts and a projection's rows, a page at a time
 * or every page, through the derived client's `readStream`, `listFacts` and `readProjection` (Api). Facts are
 * typed by the fact definitions given (and brought to the client's version of each, or refused when the
 * client's definition is older), rows by the projection's Drizzle table.
 */
import * as Result from "effect/Result"
import type { FactDefinition, Projection } from "@factline/core/definitions"
import type { Fact } from "@factline/schemas"
import type * as Api from "./Api.js"
import { UnexpectedResponse } from "./ClientError.js"

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

export interface Reads {
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

/** A query as the wire carries it: each given value as a string, an absent one left out. */
const query = (values: Readonly<Record<string, string | number | boolean | undefined>>): Record<string, string> => {
  const strings: Record<string, string> = {}
  for (const [name, value] of Object.entries(values)) if (value !== undefined) strings[name] = String(value)
  return strings
}

export const make = (api: Api.Api): Reads => {
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

  const readStream: Reads["readStream"] = async (subject, options) => {
    const page = await api.facts.readStream({ params: { subject }, query: query({ after: options?.after, limit: options?.limit }) })
    // No definitions (or none listed, which types every fact as stored too): no filter.
    const types = options?.types === undefined || options.types.length === 0 ? undefined : new Map(options.types.map((d) => [d.type, d]))
    const facts = page.facts.filter((f) => types === undefined || types.has(f.type)).map((f) => latest(types?.get(f.type), f))
    return { subject, version: page.version, facts: facts as Array<any>, next_after: page.next_after }
  }

  const streamFacts: Reads["streamFacts"] = async function*(subject, options) {
    let after = options?.after
    for (;;) {
      const page = await readStream(subject, { ...options, ...(after === undefined ? {} : { after }) })
      yield* page.facts
      if (page.next_after === null) return
      if (after !== undefined && page.next_after <= after) throw stalled(`GET /v1/streams/${encodeURIComponent(subject)}/facts`)
      after = page.next_after
    }
  }

  const readFacts: Reads["readFacts"] = async (options) => {
    const page = await api.facts.listFacts({ query: query({ type: options?.type?.type, subject: options?.subject, cursor: options?.cursor, limit: options?.limit }) })
    return { data: page.data.map((f) => latest(options?.type, f)) as Array<any>, next_cursor: page.next_cursor }
  }

  const readProjection: Reads["readProjection"] = async (projection, options) => {
    const name = typeof projection === "string" ? projection : projection.name
    const where = options?.where as Readonly<Record<string, string | number | boolean>> | undefined
    const page = await api.projections.readProjection({ params: { name }, query: query({ ...where, cursor: options?.cursor, limit: options?.limit }) })
    return {
      projection: name, data: page.data as Array<any>, next_cursor: page.next_cursor,
      ...(page.status === undefined ? {} : { status: page.status }),
      ...(page.catch_up === undefined ? {} : { catch_up: { progress: page.catch_up.progress, since: page.catch_up.since } })
    }
  }

  const projectionRows: Reads["projectionRows"] = async function*(projection, options) {
    let cursor: string | undefined
    for (;;) {
      const page = await readProjection(projection, { ...options, ...(cursor === undefined ? {} : { cursor }) })
      yield* page.data
      if (page.next_cursor === null) return
      if (page.next_cursor === cursor) throw stalled(`GET /v1/projections/${encodeURIComponent(page.projection)}`)
      cursor = page.next_cursor
    }
  }

  return { readStream, streamFacts, readFacts, readProjection, projectionRows }
}
