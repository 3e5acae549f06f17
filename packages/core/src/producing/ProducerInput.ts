/**
 * What the producer checks before anything is sent: every input decoded as an envelope and validated against its
 * message definition (every problem listed), producer-side defaults filled, and the copies of one idempotency key
 * in one call collapsed (identical) or refused (differing). Pure but for the ids and trace ids it generates;
 * Producer re-exports `invalidMessages` and `IdempotencyConflict`.
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { type Envelope, EnvelopeInput, Issues, TraceContext } from "@factline/schemas"
import type { MessageDefinition } from "../definitions/MessageDefinition.js"
import * as StableJson from "../ledger/StableJson.js"
import * as Failure from "../failures/Failure.js"
import { clientRefRefused } from "./PayloadStore.js"
import * as Delay from "./Delay.js"
import * as Personal from "../personal/Personal.js"
import * as FieldCipher from "../personal/FieldCipher.js"

/** What the edge refuses in a payload with personal data: a subject id that is personal data itself, a value sent already sealed. */
const personalProblems = (declaration: Personal.Declaration, payload: unknown, at: string): ReadonlyArray<Issues.Problem> => {
  if (typeof payload !== "object" || payload === null) return []
  const value = payload as Record<string, unknown>
  const out: Array<Issues.Problem> = []
  const subject = value[declaration.subject]
  const problem = typeof subject === "string" ? Personal.pseudonymityProblem(subject) : undefined
  if (problem !== undefined) out.push({ path: `${at}.${declaration.subject}`, message: problem })
  for (const field of declaration.fields) {
    if (FieldCipher.generationOf(value[field]) !== undefined) out.push({ path: `${at}.${field}`, message: "looks like sealed personal data (pd1.…); send the plaintext: factline seals it" })
  }
  return out
}

/** One or more messages failed validation; nothing was sent. */
export const invalidMessages = (problems: ReadonlyArray<Failure.Problem>) =>
  new Failure.InvalidInput({ code: "invalid_events", message: `${Issues.summary(problems.length)}; nothing was accepted`, problems })

/**
 * An idempotency key carries another payload than the one accepted under it
 * (before, or earlier in the same call); nothing was sent.
 */
export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>()("IdempotencyConflict", {
  conflicts: Schema.Array(Schema.Struct({
    idempotency_key: Schema.String,
    /** `accepted_before`: stored with another payload hash; `within_request`: two copies in this call differ. */
    reason: Schema.Literals(["accepted_before", "within_request"]),
    paths: Schema.Array(Schema.String)
  }))
}) implements Failure.Failure {
  readonly [Failure.TypeId] = Failure.TypeId
  get status() { return 422 }
  get code() { return "idempotency_conflict" }
  get retryable() { return false }
  get reason() { return "idempotency_conflict" as const }
  override get message() {
    return `${this.conflicts.length} idempotency key(s) carry another payload than the one accepted under them (${this.conflicts.map((k) => JSON.stringify(k.idempotency_key)).join(", ")}); nothing was accepted`
  }
  get publicMessage() { return this.message }
  get details() { return this.conflicts }
}

const decodeInput = Issues.decodeStrict(EnvelopeInput)

export interface Validated {
  /** One per input, in order. */
  readonly envelopes: Array<Envelope>
  /** Index of the first copy of each input's key (its own index for a first copy). */
  readonly firstOf: Array<number>
}

/**
 * Every input decoded and checked against its definition, every problem listed. `now` is the `created_at` given to
 * envelopes sent without one; `sender` (Telemetry.sender) re-parents an envelope of the current span's trace under
 * that span when spans are exported (the request's span, for POST /v1/events), so the events consumer's span hangs
 * under it; otherwise an envelope keeps its `traceparent`.
 */
const decodeAll = (definitions: ReadonlyMap<string, MessageDefinition>, inputs: ReadonlyArray<unknown>, prefix: string | undefined, now: string, sender: (traceparent: string | undefined) => string | undefined): Result.Result<Array<Envelope>, Failure.InvalidInput> => {
  const problems: Array<Issues.Problem> = []
  const envelopes: Array<Envelope> = []
  const pathOf = (index: number) => (prefix === undefined ? [] : [prefix, index])
  const at = (index: number, field: string) => [...pathOf(index), field].join(".")
  inputs.forEach((input, index) => {
    const path = pathOf(index)
    // Only the producer writes refs, under keys it chooses.
    if (typeof input === "object" && input !== null && "payload_ref" in input) {
      problems.push({ path: at(index, "payload_ref"), message: `${clientRefRefused} (payloads over 64 KiB are moved to R2 for you)` })
      return
    }
    const decoded = decodeInput(input, path)
    // A loop, not push(...): 150,000 problems overflow a spread's argument count.
    if (Result.isFailure(decoded)) {
      for (const problem of decoded.failure) problems.push(problem)
      return
    }
    const { delay_seconds: _delay, ...e } = decoded.success
    const scheduled = Delay.deliverAfterOf(decoded.success, Date.parse(now), path.join("."))
    if (scheduled.problem !== undefined) problems.push(scheduled.problem)
    const definition = definitions.get(e.message_type)
    if (!definition) {
      problems.push({ path: at(index, "message_type"), message: `unknown message type "${e.message_type}"` })
    } else if (e.payload !== undefined) {
      const valid = definition.validate(e.schema_version, e.payload, [...path, "payload"])
      if (Result.isFailure(valid)) {
        const p = valid.failure
        if (p._tag === "UnsupportedVersion") problems.push({ path: at(index, "schema_version"), message: p.message })
        else for (const problem of p.problems) problems.push(problem)
      } else if (definition.personalData !== undefined) {
        for (const problem of personalProblems(definition.personalData, e.payload, [...path, "payload"].join("."))) problems.push(problem)
      }
    }
    envelopes[index] = {
      ...e,
      message_id: e.message_id ?? `msg_${crypto.randomUUID()}`,
      correlation_id: e.correlation_id ?? e.idempotency_key,
      created_at: e.created_at ?? now,
      traceparent: sender(e.traceparent) ?? e.traceparent ?? TraceContext.generate(),
      ...(scheduled.deliver_after === undefined ? {} : { deliver_after: scheduled.deliver_after })
    }
  })
  if (problems.length > 0) return Result.fail(invalidMessages(problems))
  return Result.succeed(envelopes)
}

/** The same key twice in one call: identical copies collapse onto the first, differing ones conflict. */
const collapseCopies = (envelopes: Array<Envelope>, prefix: string | undefined): Result.Result<Validated, IdempotencyConflict> => {
  const firstOf: Array<number> = []
  const at = (index: number, field: string) => [...(prefix === undefined ? [] : [prefix, index]), field].join(".")
  const content = (e: Envelope) => StableJson.stringify([e.message_type, e.schema_version, e.subject, e.payload])
  const first = new Map<string, number>()
  const conflicts = new Map<string, Array<string>>()
  envelopes.forEach((e, index) => {
    const key = `${e.tenant_id}\u0000${e.idempotency_key}`
    const earlier = first.get(key)
    if (earlier === undefined) {
      first.set(key, index)
      firstOf.push(index)
      return
    }
    firstOf.push(earlier)
    if (content(envelopes[earlier]!) !== content(e)) {
      const paths = conflicts.get(key) ?? [at(earlier, "idempotency_key")]
      paths.push(at(index, "idempotency_key"))
      conflicts.set(key, paths)
    }
  })
  if (conflicts.size > 0) {
    return Result.fail(new IdempotencyConflict({
      conflicts: [...conflicts].map(([key, paths]) => ({
        idempotency_key: key.slice(key.indexOf("\u0000") + 1),
        reason: "within_request" as const,
        paths
      }))
    }))
  }
  return Result.succeed({ envelopes, firstOf })
}

/** Every input decoded and checked (all problems listed), then the copies of a key collapsed. */
export const validate = (definitions: ReadonlyMap<string, MessageDefinition>, inputs: ReadonlyArray<unknown>, prefix: string | undefined, now: string, sender: (traceparent: string | undefined) => string | undefined): Result.Result<Validated, Failure.InvalidInput | IdempotencyConflict> => {
  const decoded = decodeAll(definitions, inputs, prefix, now, sender)
  return Result.isFailure(decoded) ? Result.fail(decoded.failure) : collapseCopies(decoded.success, prefix)
}
