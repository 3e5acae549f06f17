/**
 * A message type, defined once: its name, its payload schema per
 * `schema_version`, and an upcaster from each version to the next.
 *
 * ```ts
 * const CallCompleted = MessageDefinition.event("call.completed")
 *   .version(1, CallCompletedV1)
 *   .version(2, CallCompletedV2, (v1) => ({ ...v1, currency: "USD" }))
 * ```
 *
 * The handler of a definition only ever sees the latest version. This module
 * decodes and upcasts payloads; it does not route or handle anything.
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { Issues } from "@factline/schemas"
import * as Naming from "./Naming.js"
import type * as Personal from "../personal/Personal.js"

export type Kind = "event" | "command"

/** The payload types of a definition's versions, by `schema_version`. */
export type VersionTypes = { readonly [version: number]: unknown }
/** The payload type of `Definition` at `schema_version` `N`. */
export type PayloadAt<Definition, N extends number> = Definition extends MessageDefinition<string, any, infer V> ? N extends keyof V ? V[N] : never : never

interface Version {
  readonly version: number
  readonly schema: Schema.Top
  readonly upcast: ((previous: unknown) => unknown) | undefined
  readonly decode: (input: unknown, prefix?: ReadonlyArray<PropertyKey>) => Result.Result<unknown, Array<Issues.Problem>>
}

export type PayloadProblem =
  | { readonly _tag: "UnsupportedVersion"; readonly message: string }
  | { readonly _tag: "InvalidPayload"; readonly problems: ReadonlyArray<Issues.Problem> }

/**
 * `V` is the payload type of each version, by number (`{ 1: V1; 2: V2 }`): what lets the test kit type a
 * payload written at an older version (`message(CallCompleted, v1Payload, { version: 1, … })`).
 */
export class MessageDefinition<Name extends string = string, A = unknown, V extends VersionTypes = VersionTypes> {
  declare readonly Type: A
  declare readonly Versions: V
  constructor(
    readonly kind: Kind,
    readonly messageType: Name,
    readonly versions: ReadonlyArray<Version>,
    /** The personal data its payload carries (`personal(…)`), checked by the registry. */
    readonly personalData: Personal.Declaration | undefined = undefined
  ) {}

  /**
   * Declares the payload's personal fields and the field naming their data subject (a pseudonymous id): they
   * are sealed under the subject's key before the event is queued, opened for the handler, and erasable
   * (docs/personal-data.md). Applies to every version (a personal field keeps its name across versions).
   */
  personal<S extends Personal.SubjectField<A>>(declaration: Personal.Of<A, S>): MessageDefinition<Name, A, V> {
    return new MessageDefinition<Name, A, V>(this.kind, this.messageType, this.versions, { subject: declaration.subject, fields: [...declaration.fields] })
  }

  /** The newest `schema_version`: what handlers receive and producers send by default. */
  get latestVersion(): number {
    return this.versions.length
  }

  /**
   * Adds the next version. Versions are numbered 1, 2, 3… without gaps; every
   * version after the first needs the upcaster from the one before.
   */
  version<S extends Schema.Top, const N extends number = number>(
    version: N,
    schema: S,
    ...upcast: [A] extends [never] ? [] : [(previous: A) => S["Type"]]
  ): MessageDefinition<Name, S["Type"], V & { readonly [K in N]: S["Type"] }> {
    if (version !== this.versions.length + 1) {
      throw new Error(
        `${this.messageType}: versions must be declared in order 1, 2, 3…; got ${version} after ${this.versions.length}`
      )
    }
    const up = upcast[0] as ((previous: unknown) => unknown) | undefined
    if (version > 1 && up === undefined) throw new Error(`${this.messageType}: version ${version} needs an upcaster from ${version - 1}`)
    return new MessageDefinition<Name, S["Type"], V & { readonly [K in N]: S["Type"] }>(this.kind, this.messageType, [
      ...this.versions,
      { version, schema, upcast: up, decode: Issues.decodeStrict(schema) }
    ], this.personalData)
  }

  /** Validates a payload at `schemaVersion` without upcasting (the producer's check). */
  validate(schemaVersion: number, payload: unknown, prefix: ReadonlyArray<PropertyKey> = ["payload"]): Result.Result<unknown, PayloadProblem> {
    const v = this.versions[schemaVersion - 1]
    if (v === undefined) return Result.fail(this.unsupported(schemaVersion))
    const decoded = v.decode(payload, prefix)
    return Result.isSuccess(decoded) ? Result.succeed(decoded.success) : Result.fail({ _tag: "InvalidPayload", problems: decoded.failure })
  }

  /** Decodes a payload written at `schemaVersion` and upcasts it to the latest version. */
  decode(schemaVersion: number, payload: unknown): Result.Result<A, PayloadProblem> {
    const validated = this.validate(schemaVersion, payload)
    if (Result.isFailure(validated)) return Result.fail(validated.failure)
    let value = validated.success
    for (const next of this.versions.slice(schemaVersion)) value = next.upcast!(value)
    return Result.succeed(value as A)
  }

  private unsupported(schemaVersion: number): PayloadProblem {
    return {
      _tag: "UnsupportedVersion",
      message: `${this.messageType} schema_version ${schemaVersion} is not supported (known: 1..${this.latestVersion})`
    }
  }
}

// No version yet (`{}`): `.version(1, …)` adds the first.
const make = (kind: Kind) => <Name extends string>(messageType: Name): MessageDefinition<Name, never, {}> => {
  Naming.check("message type", messageType)
  return new MessageDefinition<Name, never, {}>(kind, messageType, [])
}

/** Something that happened, past tense: `call.completed`. */
export const event = make("event")
/** Something asked for, imperative: `call.dispute`. */
export const command = make("command")
