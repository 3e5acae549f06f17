/**
 * A fact type with its data schema: `FactDefinition.make("charge", ChargeData)`.
 *
 * The definition is the only way to name a fact type in product code, so a
 * misspelled type is a compile error, not a projection that never fires:
 * handlers and processors declare the definitions they emit and return
 * `Charge.make({...})` (typed data); deciders fold a typed union of the facts
 * they declare; projections map `Projection.on(Charge, (data) => …)`. At run
 * time the registry validates every fact a handler or processor returns
 * against its definition's schema before it reaches the ledger: a wrongly
 * shaped fact is a permanent failure naming the field, never a stored fact.
 *
 * Fact data is stored as JSON, so a fact schema should describe JSON values
 * (its decoded and encoded forms the same: structs, strings, numbers,
 * booleans, arrays, literals).
 *
 * Versions, like messages' (MessageDefinition): `make(type, schema)` is
 * version 1; `.version(2, V2, (v1) => ({ ...v1, currency: "USD" }))` adds the
 * next one with the upcaster from the one before. A fact is stored with the
 * `schema_version` it was written at (drafts are always written at the
 * latest); everything that reads stored facts — deciders' folds, processors,
 * projections, webhooks, exports, the HTTP reads — sees the latest shape
 * through `upcast`, which refuses a version newer than the code knows and
 * checks what the upcasters produced against the latest schema.
 */
import type { Schema } from "effect"
import * as Result from "effect/Result"
import { type Fact, Issues } from "@factline/schemas"
import * as Naming from "./Naming.js"
import type * as Personal from "../personal/Personal.js"

/** What a handler returns: a fact to append, before the ledger gives it an id and a sequence. */
export interface NewFact<T extends string = string, D = Record<string, unknown>> {
  readonly type: T
  readonly data: D
}

/** A stored fact of one type, its data typed (in its type's latest shape once it went through `upcast`). */
export type StoredFact<T extends string = string, D = unknown> = Omit<Fact, "type" | "data"> & { readonly type: T; readonly data: D }

/** One `schema_version` of a fact type: its schema, and the upcaster from the version before (none for 1). */
export interface Version {
  readonly version: number
  readonly schema: Schema.Top
  readonly upcast: ((previous: any) => unknown) | undefined
}

/** Why stored data cannot be brought to the latest shape. */
export type UpcastProblem =
  /** Written by newer code than this (or an invalid version): never applied as if it were known. */
  | { readonly _tag: "UnsupportedVersion"; readonly message: string }
  /** An upcaster threw, or produced data the latest schema refuses (a bug in the upcaster). */
  | { readonly _tag: "UpcastFailed"; readonly message: string }

/** The data types of a fact type's versions, by `schema_version`. */
export type VersionTypes = { readonly [version: number]: unknown }
/** The data type of `Definition` at `schema_version` `N`: what the test kit's `fact(Def, data, { version: N })` takes. */
export type DataAt<Definition, N extends number> = Definition extends FactDefinition<string, any, infer V> ? N extends keyof V ? V[N] : never : never

/** `V` is the data type of each version, by number (`{ 1: V1; 2: V2 }`); it exists in types only. */
export interface FactDefinition<T extends string = string, D = any, V extends VersionTypes = VersionTypes> {
  readonly _tag: "FactDefinition"
  readonly type: T
  /** Never set: carries `V` for the test kit's typed older versions. */
  readonly Versions?: V
  /** The latest version's schema: what drafts are validated against (`typeof Started.schema.Type` is the data's type). */
  readonly schema: Schema.Codec<D, unknown>
  /** Every version, 1 to `latestVersion`, in order. */
  readonly versions: ReadonlyArray<Version>
  /** The version drafts are written at, and the shape every reader sees. */
  readonly latestVersion: number
  /**
   * Adds the next version (1, 2, 3… without gaps) with the upcaster from the one before: the new
   * definition replaces this one everywhere (handlers' emits, listeners), under the same type.
   */
  readonly version: <S extends Schema.Top, const N extends number = number>(
    version: N,
    schema: S,
    upcast: (previous: D) => S["Type"]
  ) => FactDefinition<T, S["Type"], V & { readonly [K in N]: S["Type"] }>
  /**
   * Data stored at `schemaVersion` in the latest shape: unchanged when it is the latest; else each
   * upcaster in turn, the result checked against the latest schema. A version above `latestVersion`
   * (or below 1) is refused, never read as if it were known.
   */
  readonly upcast: (schemaVersion: number, data: unknown) => Result.Result<D, UpcastProblem>
  /** A typed draft to return from a handler or processor. */
  readonly make: (data: D) => NewFact<T, D>
  readonly is: (fact: Fact | StoredFact) => fact is StoredFact<T, D> & Fact
  /** The fact's data, typed (no validation: stored facts were validated before they were appended). */
  readonly data: (fact: Fact | StoredFact) => D
  /** Validates data against the schema; problems name the field (`data.amount_cents`). */
  readonly validate: (data: unknown) => Result.Result<D, ReadonlyArray<Issues.Problem>>
  /** The personal data its facts carry (`personal(…)`), checked by the registry. */
  readonly personalData: Personal.Declaration | undefined
  /**
   * Declares the data's personal fields and the field naming their data subject (a pseudonymous id): stored
   * sealed under the subject's key, opened for every reader, erasable (docs/personal-data.md). Kept by later
   * versions (a personal field keeps its name across versions).
   */
  readonly personal: <S extends Personal.SubjectField<D>>(declaration: Personal.Of<D, S>) => FactDefinition<T, D, V>
}

export type Any = FactDefinition<string, any>
export type TypeOf<F> = F extends FactDefinition<infer T, any> ? T : never
export type DataOf<F> = F extends FactDefinition<any, infer D> ? D : never
/** The drafts a handler declaring `E` may return: one of its definitions' `make` results. */
export type DraftOf<E extends ReadonlyArray<Any>> = { [K in keyof E]: E[K] extends FactDefinition<infer T, infer D> ? NewFact<T, D> : never }[number]
/** The stored facts of the definitions in `E`, as a discriminated union on `type`. */
export type FactOf<E extends ReadonlyArray<Any>> = { [K in keyof E]: E[K] extends FactDefinition<infer T, infer D> ? StoredFact<T, D> : never }[number]

const reason = (error: unknown) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error))

const build = <T extends string, D, V extends VersionTypes>(type: T, versions: ReadonlyArray<Version>, personalData: Personal.Declaration | undefined = undefined): FactDefinition<T, D, V> => {
  const latest = versions[versions.length - 1]!
  const latestVersion = versions.length
  const decode = Issues.decodeStrict(latest.schema)
  const validate = (data: unknown): Result.Result<D, ReadonlyArray<Issues.Problem>> => {
    const result = decode(data, ["data"])
    return Result.isSuccess(result) ? Result.succeed(result.success as D) : Result.fail(result.failure)
  }
  return {
    _tag: "FactDefinition",
    type,
    schema: latest.schema as Schema.Codec<D, unknown>,
    versions,
    latestVersion,
    version: <S extends Schema.Top, const N extends number = number>(version: N, schema: S, upcast: (previous: D) => S["Type"]) => {
      if (version !== latestVersion + 1) {
        throw new Error(`fact type ${type}: versions must be declared in order 1, 2, 3…; got ${version} after ${latestVersion}`)
      }
      if (typeof upcast !== "function") throw new Error(`fact type ${type}: version ${version} needs an upcaster from ${latestVersion}`)
      return build<T, S["Type"], V & { readonly [K in N]: S["Type"] }>(type, [...versions, { version, schema, upcast }], personalData)
    },
    upcast: (schemaVersion, data) => {
      if (schemaVersion === latestVersion) return Result.succeed(data as D)
      if (!Number.isInteger(schemaVersion) || schemaVersion < 1 || schemaVersion > latestVersion) {
        return Result.fail({
          _tag: "UnsupportedVersion",
          message: `fact type ${type} schema_version ${schemaVersion} is not supported by this code (known: 1..${latestVersion})`
        })
      }
      let value = data
      for (const next of versions.slice(schemaVersion)) {
        try {
          value = next.upcast!(value)
        } catch (error) {
          return Result.fail({ _tag: "UpcastFailed", message: `fact type ${type}: the upcaster to version ${next.version} threw for data of version ${schemaVersion}: ${reason(error)}` })
        }
      }
      const valid = validate(value)
      return Result.isSuccess(valid)
        ? Result.succeed(valid.success)
        : Result.fail({ _tag: "UpcastFailed", message: `fact type ${type}: data of version ${schemaVersion} upcast to version ${latestVersion} is invalid: ${Issues.render(valid.failure)}` })
    },
    make: (data) => ({ type, data }),
    is: (fact): fact is any => fact.type === type,
    data: (fact) => fact.data as D,
    validate,
    personalData,
    personal: (declaration) => build<T, D, V>(type, versions, { subject: declaration.subject, fields: [...declaration.fields] })
  }
}

/** A fact type at version 1; add later versions with `.version(2, V2, (v1) => …)`. */
export const make = <const T extends string, S extends Schema.Top>(type: T, schema: S): FactDefinition<T, S["Type"], { readonly 1: S["Type"] }> => {
  Naming.check("fact type", type)
  return build<T, S["Type"], { readonly 1: S["Type"] }>(type, [{ version: 1, schema, upcast: undefined }])
}

export const isFactDefinition = (u: unknown): u is Any => typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "FactDefinition"
