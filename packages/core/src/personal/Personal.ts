/**
 * Personal data, declared once on the definition that carries it: which top-level fields of a message's payload
 * or a fact's data are personal data, and which field names their data subject.
 *
 * ```ts
 * const CallCompleted = MessageDefinition.event("call.completed")
 *   .version(1, V1)
 *   .version(2, V2, (v1) => ({ ...v1, caller_phone: undefined }))
 *   .personal({ subject: "buyer_id", fields: ["caller_phone"] })
 * ```
 *
 * The types keep the declaration honest: `subject` must be a string field, and every personal field a field
 * that accepts any string (a plain `string`, optional or nullable), because an erased value reads as the
 * marker `"[erased]"` and must still decode and typecheck. The registry checks the rest at start-up
 * (`problems`): the fields exist in the latest schema, their schemas accept the marker, and a fact derived
 * from personal data declares the same fields (no silent copy in plaintext). The data subject id must be
 * pseudonymous — a customer id, never an email address or a phone number: it is stored in plaintext, so
 * erasure can find what to erase; `pseudonymityProblem` refuses what can be recognised.
 *
 * Where the values go: sealed at the edge (docs/personal-data.md), opened for product code (KeyRing.ts).
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { Issues } from "@factline/schemas"

/** What an erased personal field reads as, everywhere, every time. */
export const erased = "[erased]"

/** A declaration as the runtime holds it. */
export interface Declaration {
  /** The field holding the data subject's pseudonymous id (a string field). */
  readonly subject: string
  /** The personal fields (top level, string-valued). */
  readonly fields: ReadonlyArray<string>
}

type Present<V> = Exclude<V, undefined | null>

/** The keys of `A` whose values are strings: possible data subject fields. */
export type SubjectField<A> = { [K in keyof A & string]-?: A[K] extends string ? K : never }[keyof A & string]

/** The keys of `A` whose values accept any string (optional or nullable allowed): possible personal fields. */
export type PersonalField<A> = {
  [K in keyof A & string]-?: string extends Present<A[K]> ? (Present<A[K]> extends string ? K : never) : never
}[keyof A & string]

/** A typed declaration over data of type `A`: the subject a string field, each personal field a string field other than it. */
export interface Of<A, S extends SubjectField<A> = SubjectField<A>> {
  readonly subject: S
  readonly fields: readonly [Exclude<PersonalField<A>, S>, ...ReadonlyArray<Exclude<PersonalField<A>, S>>]
}

/** The top-level fields of a struct schema, or undefined for any other schema. */
const fieldsOf = (schema: Schema.Top): Record<string, Schema.Top> | undefined => {
  const fields = (schema as { readonly fields?: unknown }).fields
  return typeof fields === "object" && fields !== null ? fields as Record<string, Schema.Top> : undefined
}

/** The top-level field names of a schema (empty for a schema that is not a struct). */
export const fieldNames = (schema: Schema.Top): ReadonlyArray<string> => Object.keys(fieldsOf(schema) ?? {})

/**
 * What is wrong with a declaration over these versions' schemas (empty: nothing): the subject and the fields
 * exist in the latest schema (a struct), the subject is not one of the fields, and every version that has a
 * personal field accepts the marker in it.
 */
export const problems = (owner: string, declaration: Declaration, schemas: ReadonlyArray<Schema.Top>): ReadonlyArray<string> => {
  const out: Array<string> = []
  const latest = fieldsOf(schemas[schemas.length - 1]!)
  if (latest === undefined) return [`${owner} declares personal data, but its schema is not a struct: personal fields must be top-level fields of a Schema.Struct`]
  if (!(declaration.subject in latest)) out.push(`${owner}: personal data subject field "${declaration.subject}" is not a field of its latest schema (fields: ${Object.keys(latest).join(", ")})`)
  if (declaration.fields.length === 0) out.push(`${owner}: a personal declaration names at least one field`)
  for (const field of declaration.fields) {
    if (field === declaration.subject) out.push(`${owner}: "${field}" is the data subject field; it cannot also be a personal field (the subject id must be pseudonymous and stays readable so erasure can find it)`)
    if (!(field in latest)) out.push(`${owner}: personal field "${field}" is not a field of its latest schema (fields: ${Object.keys(latest).join(", ")})`)
  }
  schemas.forEach((schema, index) => {
    const fields = fieldsOf(schema)
    if (fields === undefined) return
    for (const field of declaration.fields) {
      if (!(field in fields)) continue
      const accepts = Issues.decodeStrict(Schema.Struct({ [field]: fields[field]! }))({ [field]: erased })
      if (Result.isFailure(accepts)) {
        out.push(`${owner}: personal field "${field}" (version ${index + 1}) refuses the erased marker ${JSON.stringify(erased)}: ${Issues.render(accepts.failure)}. Erased values read as the marker, so its schema must accept any string (Schema.String, optional or nullable): check its format in the handler instead`)
      }
    }
  })
  return out
}

const email = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
const phone = /^\+\d[\d\s().-]{6,}$/

/**
 * Why a data subject id is not pseudonymous, when that can be seen: an email address or a phone number is
 * personal data itself, and the subject id is stored in plaintext everywhere. Undefined when it looks fine.
 */
export const pseudonymityProblem = (subjectId: string): string | undefined => {
  if (subjectId.length === 0) return "the data subject id is empty"
  if (subjectId.length > 256) return "the data subject id is longer than 256 characters"
  if (email.test(subjectId)) return "the data subject id looks like an email address: use a pseudonymous id (a customer id), never personal data itself"
  if (phone.test(subjectId)) return "the data subject id looks like a phone number: use a pseudonymous id (a customer id), never personal data itself"
  return undefined
}
