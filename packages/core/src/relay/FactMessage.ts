/**
 * Facts as messages on `factline-projections` / `factline-fact-processing`.
 *
 * One message carries the facts one consumer batch relayed to one destination
 * for one tenant (`{ facts: [...] }`), split so that no message exceeds
 * `maxMessageBytes` (the queue's limit is 128 KB); a fact too large to share
 * a message travels alone as a `payload_ref` to R2. A single fact (a
 * dead-lettered one, or a legacy message) is `{ fact }`. The envelope's
 * `idempotency_key` is the fact id for a single fact and diagnostic for a
 * batch: consumers dedupe per fact, by fact id. A single fact's message
 * carries its `traceparent`; in a batch each fact carries its own.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { Envelope, type Fact, FactBatchPayload, FactPayload, Issues, tenantKey } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import { PayloadStore } from "../producing/PayloadStore.js"
import * as SendBatches from "../platform/SendBatches.js"

export const source = "factline-ledger"
/** Queue messages are limited to 128 KB; a fact message stays well below it. */
export const maxMessageBytes = 100 * 1024
/** The `message_type` of a message carrying several facts. */
export const batchMessageType = "facts.batch"

export interface Options {
  readonly replayed?: boolean
}

/** An envelope carrying one fact (`{ fact }`) or several of one tenant (`{ facts }`). */
export const make = (facts: Fact | ReadonlyArray<Fact>, options: Options = {}): Envelope => {
  const list: ReadonlyArray<Fact> = Array.isArray(facts) ? facts : [facts as Fact]
  const first = list[0]!
  const single = !Array.isArray(facts)
  const replayed = options.replayed ? { replayed: true } : {}
  return {
    schema_version: 1,
    message_type: single ? `fact.${first.type}` : batchMessageType,
    message_id: `msg_${crypto.randomUUID()}`,
    idempotency_key: single ? first.fact_id : `facts:${first.fact_id}:${list.length}`,
    correlation_id: first.correlation_id,
    causation_id: first.causation_id,
    tenant_id: first.tenant_id,
    subject: first.stream,
    source,
    created_at: first.created_at,
    payload: single ? { fact: first, ...replayed } : { facts: list, ...replayed },
    ...(single && first.traceparent !== undefined ? { traceparent: first.traceparent } : {})
  }
}

/** A fact's JSON byte length (no allowance): what it adds to a message's `facts`, besides a comma. */
export const factBytes = (fact: Fact): number => SendBatches.utf8Bytes(JSON.stringify(fact))

/** One packed message: its body, the facts it carries and its size as `SendBatches.sizeOf` counts it. */
export interface Packed {
  readonly body: Envelope
  readonly facts: ReadonlyArray<Fact>
  readonly bytes: number
}

/**
 * Packs facts into as few messages as the size limit allows: one tenant per
 * message, in order. A fact whose own message would be too large is put in
 * R2 by `offload` and sent alone as a `payload_ref`. Each fact is measured once
 * (`bytesOf`: a caller packing the same facts for several destinations passes
 * one memo to them all), and a message's size is its envelope's plus its facts'.
 */
export const pack = async (
  facts: ReadonlyArray<Fact>,
  offload: (tenantId: string, name: string, payload: unknown) => Promise<string>,
  options: Options = {},
  bytesOf: (fact: Fact) => number = factBytes
): Promise<Array<Packed>> => {
  const out: Array<Packed> = []
  const byTenant = new Map<string, Array<Fact>>()
  for (const fact of facts) {
    const list = byTenant.get(fact.tenant_id)
    if (list) list.push(fact)
    else byTenant.set(fact.tenant_id, [fact])
  }
  /** The size of a batch message's envelope with no facts in it. */
  const emptySize = (body: Envelope) => SendBatches.sizeOf({ ...body, payload: { ...(body.payload as object), facts: [] } })
  // What a message adds besides its facts' own sizes (each counted with the per-message allowance): the envelope,
  // the comma between two facts, less the allowance counted twice for them.
  const overhead = emptySize(make([facts[0]!], options)) + 1 - 2 * SendBatches.perMessageOverheadBytes
  for (const list of byTenant.values()) {
    let current: Array<Fact> = []
    let bytes = overhead
    let factsBytes = 0
    const flush = () => {
      if (current.length > 0) {
        const body = make(current, options)
        // Exact: the JSON text of `{ facts: [a, b] }` is that of `{ facts: [] }` with `a,b` inside.
        out.push({ body, facts: current, bytes: emptySize(body) + factsBytes + current.length - 1 })
      }
      current = []
      bytes = overhead
      factsBytes = 0
    }
    for (const fact of list) {
      const exact = bytesOf(fact)
      const size = exact + SendBatches.perMessageOverheadBytes
      if (overhead + size > maxMessageBytes) {
        const { payload, ...rest } = make(fact, options)
        const payload_ref = await offload(fact.tenant_id, `facts/${fact.fact_id}`, payload)
        const body = { ...rest, payload_ref }
        out.push({ body, facts: [fact], bytes: SendBatches.sizeOf(body) })
        continue
      }
      if (bytes + size > maxMessageBytes) flush()
      current.push(fact)
      bytes += size
      factsBytes += exact
    }
    flush()
  }
  return out
}

const decodeEnvelope = Issues.decodeStrict(Envelope)
const decodeBatch = Issues.decodeStrict(FactBatchPayload)
const decodeSingle = Issues.decodeStrict(FactPayload)

/** One fact of a message, as the consumers handle it. */
export type Item = { readonly key: string; readonly value: FactPayload }

/** The consumer side: envelope → (loaded) facts, each keyed `tenant/fact_id`; failures are dead-letter reasons. */
export const decode = (body: unknown) =>
  Effect.gen(function*() {
    const envelope = decodeEnvelope(body)
    if (Result.isFailure(envelope)) {
      return yield* new Failure.PermanentError({ reason: "decode_error", message: Issues.render(envelope.failure) })
    }
    const e = envelope.success
    let payload: unknown = e.payload
    if (e.payload_ref !== undefined) {
      const store = yield* PayloadStore
      payload = yield* store.get(e.tenant_id, e.payload_ref)
    }
    const isBatch = typeof payload === "object" && payload !== null && "facts" in payload
    const decoded = isBatch
      ? Result.map(decodeBatch(payload, ["payload"]), (p) => ({ facts: p.facts, replayed: p.replayed }))
      : Result.map(decodeSingle(payload, ["payload"]), (p) => ({ facts: [p.fact], replayed: p.replayed }))
    if (Result.isFailure(decoded)) {
      return yield* new Failure.PermanentError({ reason: "decode_error", message: Issues.render(decoded.failure) })
    }
    const { facts, replayed } = decoded.success
    if (facts.some((f) => f.tenant_id !== e.tenant_id)) {
      return yield* new Failure.PermanentError({ reason: "decode_error", message: "a fact's tenant_id differs from the envelope's tenant_id" })
    }
    return facts.map((fact): Item => ({ key: tenantKey(e.tenant_id, fact.fact_id), value: replayed ? { fact, replayed } : { fact } }))
  })

/** A fact's own message, for dead-lettering it alone (replayable on its own). */
export const isolate = (item: Item): Envelope => make(item.value.fact, { replayed: item.value.replayed })
