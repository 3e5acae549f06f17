/**
 * The handlers of the Facts routes, implemented against their description (`@factline/core/api`'s `Facts`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import { Failure } from "@factline/core"
import { Export, FactsCopy, Ledger, Placement, ProjectionQuery, Trace } from "@factline/core/runtime"
import { Issues } from "@factline/schemas"
import * as CloudEvents from "./CloudEvents.js"
import { apiOf, Caller } from "./Edge.js"
import { Contract, Facts as Description } from "@factline/core/api"

/** A CloudEvents batch (Accept: application/cloudevents-batch+json), the next page in a `Link` header: the `alsoAnswers` of the description. */
const cloudEventsBatch = (events: ReadonlyArray<unknown>, next: string | undefined) =>
  HttpServerResponse.text(JSON.stringify(events), { contentType: CloudEvents.batchContentType, headers: next === undefined ? {} : { link: `<${next}>; rel="next"` } })

/** The request's `Accept` asks for a CloudEvents batch (a 406 when it refuses both media types) and its URL. */
const negotiated = Effect.map(HttpServerRequest.HttpServerRequest, (request) => ({
  batch: CloudEvents.wantsBatch(request.headers.accept),
  url: new URL((request.source as Request).url)
}))

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "facts", (handlers) =>
  handlers
    .handle("readStream", ({ params: { subject }, query }) =>
      Effect.gen(function*() {
        const { batch, url } = yield* negotiated
        const { tenantId } = yield* Caller
        const limit = Contract.pageLimit(query.limit, Description.streamLimit)
        const read = yield* (yield* Ledger.Ledger).read({ tenant_id: tenantId, stream: subject }, { after: query.after === undefined ? 0 : Number(query.after), limit })
        if (read.version === 0) return yield* new Failure.NotFound({ message: `no stream "${subject}" for this tenant` })
        const facts = yield* Trace.readable(read.facts)
        const last = facts.at(-1)?.sequence
        const nextAfter = last !== undefined && last < read.version ? last : null
        if (batch) return cloudEventsBatch(facts.map(CloudEvents.fromFact), nextAfter === null ? undefined : `${url.pathname}?after=${nextAfter}&limit=${limit}`)
        return { subject, version: read.version, facts, next_after: nextAfter }
      }))
    /** The causation chain of a fact (core's Trace): back to the message that caused it, forward to what it caused. */
    .handle("traceFact", ({ params, query }) => Effect.flatMap(Caller, (caller) => Trace.trace(caller.tenantId, params.fact_id, query.subject)))
    .handle("listFacts", ({ query }) =>
      Effect.gen(function*() {
        const { batch, url } = yield* negotiated
        const { tenantId } = yield* Caller
        const { data, nextCursor } = query.subject !== undefined ? yield* listStream(tenantId, query) : yield* listCopy(tenantId, query)
        if (!batch) return { data, next_cursor: nextCursor }
        if (nextCursor !== null) url.searchParams.set("cursor", nextCursor)
        // A row names its stream `subject` and has no tenant (the token's one): back to the ledger's fact shape.
        const events = data.map(({ subject, ...f }) => CloudEvents.fromFact({ ...f, stream: subject, tenant_id: tenantId }))
        return cloudEventsBatch(events, nextCursor === null ? undefined : `${url.pathname}${url.search}`)
      })))

interface Listing {
  readonly data: ReadonlyArray<Description.ListedFact>
  readonly nextCursor: string | null
}

type ListingQuery = Readonly<Record<string, string | undefined>>

const invalidQuery = (problems: ReadonlyArray<Issues.Problem>) => new Failure.InvalidInput({ code: "invalid_query", message: Issues.render(problems), problems })

/**
 * `GET /v1/facts?subject=…`: the stream's facts from the ledger, by sequence, after the cursor's sequence. With
 * `type`, the stream is read a page of `streamListingPage` facts at a time, at most `streamListingReads` pages, and
 * the facts of that type kept: the page may then hold fewer than `limit`, and its cursor is where the reading stopped.
 */
const listStream = (tenant: string, query: ListingQuery) =>
  Effect.gen(function*() {
    const asked = ProjectionQuery.streamListing(query)
    if (Result.isFailure(asked)) return yield* invalidQuery(asked.failure)
    const { subject, type, limit } = asked.success
    const key = { tenant_id: tenant, stream: subject }
    const ledger = yield* Ledger.Ledger
    const data: Array<Description.ListedFact> = []
    let after = asked.success.after
    for (let reads = 0; reads < Description.streamListingReads; reads++) {
      const state = yield* ledger.read(key, { after, limit: type === undefined ? limit : Description.streamListingPage })
      const facts = yield* Trace.readable(state.facts.filter((f) => type === undefined || f.type === type))
      let next = 0
      for (const stored of state.facts) {
        after = stored.sequence
        if (type !== undefined && stored.type !== type) continue
        data.push(Export.listedFact(facts[next++]!))
        if (data.length === limit) return { data, nextCursor: after < state.version ? ProjectionQuery.streamCursor(after) : null } satisfies Listing
      }
      if (state.facts.length === 0 || after >= state.version) return { data, nextCursor: null } satisfies Listing
    }
    // The page's reads are spent before the stream's end: the next page goes on from here.
    return { data, nextCursor: ProjectionQuery.streamCursor(after) } satisfies Listing
  })

/** `GET /v1/facts` without a subject: the D1 copy, if it holds every fact the listing asks for. */
const listCopy = (tenant: string, query: ListingQuery) =>
  Effect.gen(function*() {
    const page = ProjectionQuery.facts(tenant, query)
    if (Result.isFailure(page)) return yield* invalidQuery(page.failure)
    const factsCopy = yield* FactsCopy.FactsCopySetting
    if (!FactsCopy.holds(factsCopy, query.type)) {
      const setting = `${FactsCopy.variable}=${FactsCopy.render(factsCopy)}`
      return yield* new Failure.Conflict({
        code: "facts_not_copied",
        message: query.type === undefined
          ? `listing facts of every type across streams needs the D1 facts copy of every type, and this platform copies ${factsCopy.kind === "none" ? "none" : `only ${FactsCopy.render(factsCopy)}`} (${setting}): pass subject= to read one stream from the ledger${factsCopy.kind === "types" ? ", or type= one of the copied types" : ""}`
          : `the D1 facts copy holds no ${JSON.stringify(query.type.slice(0, 100))} facts (${setting}): pass subject= to read one stream from the ledger, or ask the platform operator to copy this type`
      })
    }
    const rows = yield* Placement.reading(tenant)(ProjectionQuery.run(page.success))
    // The facts copy's columns are ListedFact's, its body the fact's data as JSON (ProjectionQuery.facts selects them), at its `schema_version`.
    const listed = rows.slice(0, page.success.limit).map(({ body, ...row }) => {
      const fact = row as Omit<Description.ListedFact, "data">
      const { subject, traceparent: _, ...rest } = fact
      return { fact, stored: { ...rest, stream: subject, tenant_id: tenant, data: JSON.parse(String(body)) as Description.ListedFact["data"] } }
    })
    const current = yield* Trace.readable(listed.map((l) => l.stored))
    const data = listed.map(({ fact }, i) => ({ ...fact, schema_version: current[i]!.schema_version ?? 1, data: current[i]!.data }))
    return { data, nextCursor: page.success.nextCursor(rows) } satisfies Listing
  })

