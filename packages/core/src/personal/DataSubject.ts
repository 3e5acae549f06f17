/**
 * The data subject a queue message carries personal data of, read from the message as it travels: what the
 * writers of runs, dead letters and webhook attempts record in their `data_subject` column, so that erasing a
 * subject (Erasure.ts) finds the rows whose error texts or snippets may quote its personal data.
 *
 * The subject id sits in plaintext beside the sealed fields (it is pseudonymous by rule, Personal.ts): an event's
 * payload by its message type's declaration, a fact's data (one fact, or the first personal one of a batch of
 * facts) by its fact type's, a webhook delivery's payload by its fact type's. A message without a declared
 * subject, or of an unknown shape, has none (null). It never opens anything and never fails.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { DeclarationOf } from "./Sealing.js"

/** The registry's two lookups (Registry: `personalMessage`, `personalFact`). */
export interface Lookup {
  readonly personalMessage: DeclarationOf
  readonly personalFact: DeclarationOf
}

/** Longest subject id recorded (ids are pseudonymous keys; a longer value is not one). */
export const maxLength = 256

const isRecord = (u: unknown): u is Readonly<Record<string, unknown>> => typeof u === "object" && u !== null && !Array.isArray(u)

const subjectIn = (declarationOf: DeclarationOf, type: unknown, value: unknown): string | null => {
  if (typeof type !== "string" || !isRecord(value)) return null
  const declaration = declarationOf(type)
  if (declaration === undefined) return null
  const subject = value[declaration.subject]
  return typeof subject === "string" && subject.length > 0 && subject.length <= maxLength ? subject : null
}

const ofFact = (lookup: Lookup, fact: unknown): string | null => (isRecord(fact) ? subjectIn(lookup.personalFact, fact.type, fact.data) : null)

/** The data subject of a queue message's body (an envelope of any platform queue), or null. */
export const ofMessage = (lookup: Lookup, body: unknown): string | null => {
  if (!isRecord(body)) return null
  const payload = body.payload
  if (isRecord(payload)) {
    if (isRecord(payload.fact)) return ofFact(lookup, payload.fact)
    if (Array.isArray(payload.facts)) {
      for (const fact of payload.facts) {
        const subject = ofFact(lookup, fact)
        if (subject !== null) return subject
      }
      return null
    }
    if (typeof payload.fact_type === "string" && "delivery_id" in payload) {
      const delivered = payload.payload
      return subjectIn(lookup.personalFact, payload.fact_type, delivered) ?? (isRecord(delivered) ? subjectIn(lookup.personalFact, payload.fact_type, delivered.data) : null)
    }
  }
  return subjectIn(lookup.personalMessage, body.message_type, payload)
}

/** A function from a message body to its data subject: none when the registry declares no personal data. */
export const reader = (lookup: Lookup & { readonly hasPersonalData: boolean }): ((body: unknown) => string | null) =>
  lookup.hasPersonalData ? (body) => ofMessage(lookup, body) : () => null

/**
 * The deployment's reader of data subjects (built from the registry by the composition), for the writers of
 * `data_subject` below the registry (runs, dead letters, webhook attempts). Without it, nothing is recorded.
 */
export class DataSubjects extends Context.Service<DataSubjects, { readonly of: (body: unknown) => string | null }>()("@factline/core/DataSubjects") {
  static readonly layer = (lookup: Lookup & { readonly hasPersonalData: boolean }) => Layer.succeed(DataSubjects, { of: reader(lookup) })
}

const none = () => null

/** The reader in scope, or one that finds none. */
export const current: Effect.Effect<(body: unknown) => string | null> = Effect.map(Effect.serviceOption(DataSubjects), Option.match({ onNone: () => none, onSome: (s) => s.of }))
