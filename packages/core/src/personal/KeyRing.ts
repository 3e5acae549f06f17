/**
 * The key ring: seals and opens personal fields (FieldCipher) with the keys of their data subjects, kept by the
 * tenant's key store object (KeyStorage) and wrapped by the platform key `FACTLINE_SECRETS_KEY` (webhooks/Secrets.ts).
 *
 * Each call gathers the keys it lacks and asks the tenant's key store once for all of them (one RPC per tenant
 * per call, none when every key is cached). Keys are cached in the isolate for `cacheSeconds` (default 60) and
 * at most `cacheSize` of them (default 10,000, oldest out first), erased ones too: that is the bound within
 * which every isolate has dropped a key after its erasure, and the erasure operation waits it out before it
 * cleans what was derived in plaintext (docs/personal-data.md).
 *
 * Sealing leaves alone what needs no key: an absent or null field, the erased marker, a value already sealed
 * (a stored fact appended again). Opening gives the plaintext, or the marker `"[erased]"` when the key was
 * erased (or never existed, or the value does not open under it): the same answer every time. A key store that
 * cannot be reached fails the call (`Unavailable`, retried); it never turns into the marker.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Clock from "effect/Clock"
import * as Failure from "../failures/Failure.js"
import * as FieldCipher from "./FieldCipher.js"
import * as Keys from "./Keys.js"
import * as KeyStorage from "./KeyStorage.js"
import { type Declaration, erased } from "./Personal.js"

/** One value to seal or open, with the declaration of its definition. */
export interface Item {
  readonly declaration: Declaration
  readonly value: Readonly<Record<string, unknown>>
}

export type KeyFailure = Failure.Unavailable | Failure.InvalidInput

export interface Config {
  /** The platform key that wraps the subject keys (base64 of 32 bytes): `FACTLINE_SECRETS_KEY` (platform/SecretBox.ts). */
  readonly secretsKey: string | undefined
  readonly cacheMs?: number
  readonly cacheSize?: number
  /** Whether a tenant refuses new personal data of an erased subject (default: a new key is made). */
  readonly refuseErased?: (tenant: string) => boolean
}

export { SubjectErased } from "./Keys.js"

export class KeyRing extends Context.Service<KeyRing, {
  /** Each value with its personal fields sealed (same object when nothing needed sealing). */
  readonly seal: (tenant: string, items: ReadonlyArray<Item>) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, KeyFailure>
  /** Each value with its sealed fields opened, or the marker where the key is gone (same object when nothing was sealed). */
  readonly open: (tenant: string, items: ReadonlyArray<Item>) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, Failure.Unavailable>
  /** Destroys every key of the subject in its tenant's key store and drops them from this isolate's cache. */
  readonly erase: (tenant: string, subject: string, now: string) => Effect.Effect<KeyStorage.EraseAnswer, Failure.Unavailable>
  /** The subject's key generations in its tenant's key store: every one, and those not erased (a new erasure has work). */
  readonly state: (tenant: string, subject: string) => Effect.Effect<KeyStorage.KeyState, Failure.Unavailable>
  /** How long an isolate may still hold a key after its erasure (ms): the cache's bound. */
  readonly cacheBoundMs: number
}>()("@factline/core/KeyRing") {
  static readonly layer = (config: Config) => Layer.effect(KeyRing, Effect.map(Effect.service(KeyStorage.KeyStores), ({ namespace }) => make(config, namespace)))
  /** The key ring over a namespace of key stores (the LedgerShard namespace), without the platform's composition. */
  static readonly over = (namespace: KeyStorage.KeyStoreNamespace, config: Config) => Layer.succeed(KeyRing, make(config, namespace))
}

const unavailable = (error: unknown) =>
  new Failure.Unavailable({ service: "the personal data key store", message: error instanceof Error ? error.message : String(error) })

const subjectOf = (item: Item): string | undefined => {
  const subject = item.value[item.declaration.subject]
  return typeof subject === "string" ? subject : undefined
}
const needsSeal = (value: unknown) => typeof value === "string" && value !== erased && FieldCipher.generationOf(value) === undefined

/** Each item with its personal fields sealed under its subject's key (given by subject). */
const sealItems = (tenant: string, items: ReadonlyArray<Item>, byKey: ReadonlyMap<string, FieldCipher.SubjectKey>) =>
  Promise.all(items.map(async (item) => {
    const subject = subjectOf(item)
    const key = subject === undefined ? undefined : byKey.get(subject)
    if (key === undefined) return item.value as Record<string, unknown>
    const out: Record<string, unknown> = { ...item.value }
    for (const field of item.declaration.fields) {
      const value = item.value[field]
      if (needsSeal(value)) out[field] = await FieldCipher.seal(key, tenant, subject!, field, value as string)
    }
    return out
  }))

/** Each item with its sealed fields opened, or the marker where its key is gone (keys given by `Keys.keyId`). */
const openItems = (tenant: string, items: ReadonlyArray<Item>, byId: ReadonlyMap<string, FieldCipher.SubjectKey | null>) =>
  Promise.all(items.map(async (item) => {
    const subject = subjectOf(item)
    if (subject === undefined) return item.value as Record<string, unknown>
    let out: Record<string, unknown> | undefined
    for (const field of item.declaration.fields) {
      const value = item.value[field]
      const generation = FieldCipher.generationOf(value)
      if (generation === undefined) continue
      const key = byId.get(Keys.keyId(tenant, subject, generation)) ?? null
      out ??= { ...item.value }
      out[field] = key === null ? erased : (await FieldCipher.open(key, tenant, subject, field, value as string)) ?? erased
    }
    return out ?? item.value as Record<string, unknown>
  }))

export const make = (config: Config, namespace: KeyStorage.KeyStoreNamespace): KeyRing["Service"] => {
  const ttl = config.cacheMs ?? 60_000
  const keys = Keys.make({ secretsKey: config.secretsKey, ttlMs: ttl, size: config.cacheSize ?? 10_000, refuseErased: config.refuseErased ?? (() => false) }, namespace)
  const seal: KeyRing["Service"]["seal"] = (tenant, items) => {
    const subjects = new Set<string>()
    for (const item of items) {
      const subject = subjectOf(item)
      if (subject !== undefined && item.declaration.fields.some((f) => needsSeal(item.value[f]))) subjects.add(subject)
    }
    if (subjects.size === 0) return Effect.succeed(items.map((i) => i.value as Record<string, unknown>))
    return Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.tryPromise({
        try: async () => sealItems(tenant, items, await keys.sealing(tenant, subjects, now)),
        catch: (error) =>
          error instanceof Keys.SubjectErased
            ? new Failure.InvalidInput({
              code: "subject_erased",
              message: error.message,
              // Which items: `<index>.<subject field>`, for the caller to place in its own input.
              problems: items.flatMap((item, index) => (subjectOf(item) === error.subject ? [{ path: `${index}.${item.declaration.subject}`, message: error.message }] : []))
            })
            : unavailable(error)
      }))
  }
  const open: KeyRing["Service"]["open"] = (tenant, items) => {
    const refs: Array<KeyStorage.KeyRef> = []
    for (const item of items) {
      const subject = subjectOf(item)
      if (subject === undefined) continue
      for (const field of item.declaration.fields) {
        const generation = FieldCipher.generationOf(item.value[field])
        if (generation !== undefined) refs.push({ subject, generation })
      }
    }
    if (refs.length === 0) return Effect.succeed(items.map((i) => i.value as Record<string, unknown>))
    return Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.tryPromise({ try: async () => openItems(tenant, items, await keys.opening(tenant, refs, now)), catch: unavailable }))
  }
  return {
    seal,
    open,
    cacheBoundMs: ttl,
    erase: (tenant, subject, now) => Effect.tryPromise({ try: () => keys.erase(tenant, subject, now), catch: unavailable }),
    state: (tenant, subject) => Effect.tryPromise({ try: () => keys.state(tenant, subject), catch: unavailable })
  }
}
