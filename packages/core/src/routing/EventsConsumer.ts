/**
 * The consumer of `factline-events`: envelope in, facts in the ledger.
 *
 * Decoding is strict and total: an envelope that does not decode, an unknown
 * `message_type`, a `schema_version` newer than the definition, or a
 * `payload_ref` whose object is missing is dead-lettered at once with its
 * reason, without burning retries. Items are keyed `tenant/idempotency_key`:
 * two tenants may use the same key. No inbox: a redelivered message re-decides
 * the same facts, whose deterministic ids the ledger already holds, so it
 * appends nothing (and its stored facts are relayed again, harmlessly).
 *
 * One key, one payload (Stripe's semantics, as at the HTTP edge): before
 * anything is written, each key is bound to the hash of what its message says
 * (`AcceptedKeys`, the same `accepted_keys` rows the HTTP edge writes, one D1
 * round trip per batch, made while the batch is decided). A message whose key
 * is bound to another payload — sent earlier over HTTP or through the queue, or
 * by another message of this batch — is dead-lettered as `idempotency_conflict`
 * with both hashes, and writes nothing: a redelivery or replay of the same payload is no conflict,
 * while the ledger alone could not tell a changed payload from a redelivery
 * when the facts come out the same, nor see a key reused on a subject that
 * lives on another shard.
 *
 * A message the HTTP edge accepted carries the edge's key receipt (KeyReceipts.ts): its key is bound to this
 * payload already, so the claim answers it without a round trip — the events stage's rounds are then the
 * deciders' reads (none for plain handlers), the shard appends and the relay's sends.
 *
 * Personal data: the payload's personal fields arrive sealed (the producer sealed them); the key binding hashes
 * them sealed, as the edge did, and the handler gets them opened (KeyRing), or as `"[erased]"` once erased.
 *
 * Not before its time: a message whose envelope says `deliver_after` (a delayed send, Delay.ts) and arrives
 * earlier — a dead-letter replay, a recover re-send, a redelivery of a copy sent early — is parked for what is
 * left (sent again with that delay, then acked: no attempt spent, never dead-lettered), and neither claims its
 * key nor is decided. A retry after a failure never restarts the delay: the copy keeps its `deliver_after`.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { Envelope, Issues, tenantKey } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as Failure from "../failures/Failure.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import { AcceptedKeys, type Claim, claimKey, payloadHash } from "../producing/AcceptedKeys.js"
import * as Delay from "../producing/Delay.js"
import { KeyReceipts } from "../producing/KeyReceipts.js"
import { PayloadStore } from "../producing/PayloadStore.js"
import * as Dispatch from "./Dispatch.js"
import { Registry, type Routed } from "../registry/Registry.js"
import { KeyRing } from "../personal/KeyRing.js"
import * as Time from "../platform/Time.js"

const decodeEnvelope = Issues.decodeStrict(Envelope)

export const itemKey = tenantKey

/** A routed message and what its key must be bound to (read from the envelope as sent). */
export interface Keyed {
  readonly routed: Routed
  readonly claim: Claim
  /** The envelope's `deliver_after`: not processed before it. */
  readonly deliverAfter?: string | undefined
}

export const decode = (body: unknown) =>
  Effect.gen(function*() {
    const registry = yield* Registry
    const receipts = yield* KeyReceipts
    const envelope = decodeEnvelope(body)
    if (Result.isFailure(envelope)) {
      return yield* new Failure.PermanentError({ reason: "decode_error", message: Issues.render(envelope.failure) })
    }
    const e = envelope.success
    if (!registry.handlerFor(e.message_type)) {
      return yield* new Failure.PermanentError({ reason: "unknown_message_type", message: `no handler is registered for message_type "${e.message_type}"` })
    }
    let payload: unknown = e.payload
    if (e.payload_ref !== undefined) {
      const store = yield* PayloadStore
      payload = yield* store.get(e.tenant_id, e.payload_ref)
    }
    // The hash of the payload as sent (personal fields sealed, as the edge hashed it); the handler gets them opened.
    const hash = yield* Effect.promise(() => payloadHash({ message_type: e.message_type, schema_version: e.schema_version, subject: e.subject, payload }))
    const personal = registry.personalMessage(e.message_type)
    if (personal !== undefined && typeof payload === "object" && payload !== null) {
      const keyRing = yield* KeyRing
      payload = (yield* keyRing.open(e.tenant_id, [{ declaration: personal, value: payload as Record<string, unknown> }]))[0]
    }
    const routed = registry.route(e, payload)
    if (Result.isFailure(routed)) {
      const f = routed.failure
      return yield* new Failure.PermanentError({ reason: f.reason, message: `${f.message}: ${Issues.render(f.problems)}` })
    }
    // The hash is part of the item key: copies of one payload are one item, another payload under the key is another.
    const binding = { tenant_id: e.tenant_id, idempotency_key: e.idempotency_key, payload_hash: hash }
    // Accepted at the edge, which bound the key to this payload and signed it: no claim needed (KeyReceipts.ts).
    const receipted = e.key_receipt !== undefined && (yield* Effect.promise(() => receipts.verify(binding, e.key_receipt!)))
    const claim: Claim = { ...binding, message_type: e.message_type, subject: e.subject, ...(receipted ? { receipted } : {}) }
    return [{ key: `${itemKey(e.tenant_id, e.idempotency_key)}#${hash}`, value: { routed: routed.success as Routed, claim, deliverAfter: e.deliver_after } }]
  })

const conflict = (idempotencyKey: string, bound: { readonly payload_hash: string; readonly accepted_at: string }, hash: string): Consumer.Outcome =>
  Consumer.failed(new Failure.PermanentError({
    reason: "idempotency_conflict",
    message: `idempotency key ${JSON.stringify(idempotencyKey)} is bound to another payload: accepted payload_hash ${bound.payload_hash} (first accepted ${bound.accepted_at}); ` +
      `this message's payload_hash ${hash}. Nothing was appended for it; send new work under a new idempotency key`
  }))

/**
 * Binds every key to its payload (one D1 round trip) while the batch is decided (handlers are pure; deciders only
 * read), then appends the decisions of the messages whose key is bound to theirs — so the claim is off the critical
 * path: it overlaps the handlers' CPU and the deciders' stream reads. A refused message's decision is dropped
 * unwritten, as a redelivery's is when its facts are stored.
 */
export const process = Effect.fn("EventsConsumer.process")(function*(all: ReadonlyArray<Consumer.Item<Keyed>>) {
  const now = yield* Time.now
  // Arrived before its time: parked for what is left, untouched otherwise.
  const early = new Map<string, Consumer.Outcome>()
  const nowMs = Date.parse(now)
  for (const { key, value } of all) {
    const seconds = Delay.secondsUntil(value.deliverAfter, nowMs)
    if (seconds > 0) early.set(key, Consumer.failed(Delay.notDue(value.deliverAfter!, seconds)))
  }
  if (early.size === all.length) return early as ReadonlyMap<string, Consumer.Outcome>
  const items = early.size === 0 ? all : all.filter(({ key }) => !early.has(key))
  const keys = yield* AcceptedKeys
  const [claimed, decided] = yield* Effect.all([
    Effect.result(keys.claim(items.map((item) => item.value.claim), now)),
    Dispatch.decide(items.map(({ key, value }) => ({ key, value: value.routed })))
  ], { concurrency: 2 })
  if (Result.isFailure(claimed)) {
    const outcomes = new Map<string, Consumer.Outcome>()
    for (const { key } of items) outcomes.set(key, Consumer.failed(new Failure.TransientError({ message: `idempotency keys could not be checked: ${claimed.failure.message}` })))
    for (const [key, outcome] of early) outcomes.set(key, outcome)
    return outcomes as ReadonlyMap<string, Consumer.Outcome>
  }
  const refused = new Map<string, Consumer.Outcome>()
  for (const { key, value } of items) {
    const { tenant_id, idempotency_key, payload_hash } = value.claim
    const bound = claimed.success.get(claimKey(tenant_id, idempotency_key))
    if (bound === undefined) refused.set(key, Consumer.failed(new Failure.TransientError({ message: "the idempotency key was not recorded" })))
    else if ("held" in bound) refused.set(key, Consumer.failed(bound.held))
    else if (bound.payload_hash !== payload_hash) refused.set(key, conflict(idempotency_key, bound, payload_hash))
  }
  const outcomes = yield* Dispatch.commit(decided, refused)
  if (early.size === 0) return outcomes
  const merged = new Map(outcomes)
  for (const [key, outcome] of early) merged.set(key, outcome)
  return merged as ReadonlyMap<string, Consumer.Outcome>
})

export const consume = Effect.fn("EventsConsumer.consume")(function*(batch: MessageBatch<unknown>, options: Consumer.Options = {}) {
  return yield* Consumer.run({
    policy: RetryPolicy.events,
    decode,
    process,
    delayScale: options.delayScale, log: options.log, runs: options.runs
  }, batch)
})
