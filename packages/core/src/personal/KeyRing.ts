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
import * as Failure from "../failures/Failure.js"
import * as SecretBox from "../platform/SecretBox.js"
import * as FieldCipher from "./FieldCipher.js"
import * as KeyStorage from "./KeyStorage.js"
import { type Declaration, erased } from "./Personal.js"

/** One value to seal or open, with the declaration of its definition. */
export interface Item {
  readonly declaration: Declaration
  readonly value: Readonly<Record<string, unknown>>
}

/** A data subject whose keys were erased, in a tenant that refuses new personal data of erased subjects. */
export class SubjectErased extends Error {
  override readonly name = "SubjectErased"
  constructor(readonly subject: string, readonly erasedAt: string) {
    super(`data subject ${JSON.stringify(subject)} was erased (${erasedAt}); this tenant refuses new personal data of an erased subject`)
  }
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

export class KeyRing extends Context.Service<KeyRing, {
  /** Each value with its personal fields sealed (same object when nothing needed sealing). */
  readonly seal: (tenant: string, items: ReadonlyArray<Item>) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, KeyFailure>
  /** Each value with its sealed fields opened, or the marker where the key is gone (same object when nothing was sealed). */
  readonly open: (tenant: string, items: ReadonlyArray<Item>) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, Failure.Unavailable>
  /** Destroys every key of the subject in its tenant's key store and drops them from this isolate's cache. */
  readonly erase: (tenant: string, subject: string, now: string) => Effect.Effect<KeyStorage.EraseAnswer, Failure.Unavailable>
  /** How long an isolate may still hold a key after its erasure (ms): the cache's bound. */
  readonly cacheBoundMs: number
}>()("@factline/core/KeyRing") {
  static readonly layer = (config: Config) => Layer.effect(KeyRing, Effect.map(Effect.service(KeyStorage.KeyStores), ({ namespace }) => make(config, namespace)))
}

type Store = KeyStorage.KeyStoreRpc
type Namespace = KeyStorage.KeyStoreNamespace

interface Cached<A> {
  readonly value: A
  readonly at: number
}

const unavailable = (error: unknown) =>
  new Failure.Unavailable({ service: "the personal data key store", message: error instanceof Error ? error.message : String(error) })

const b64 = (bytes: Uint8Array) => {
  let binary = ""
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]!)
  return btoa(binary)
}
const unb64 = (text: string) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0))

export const make = (config: Config, namespace: Namespace): KeyRing["Service"] => {
  const ttl = config.cacheMs ?? 60_000
  const size = config.cacheSize ?? 10_000
  /** `tenant\0subject\0generation` → the key, or null once erased. */
  const keys = new Map<string, Cached<FieldCipher.SubjectKey | null>>()
  /** `tenant\0subject` → the generation to seal with. */
  const current = new Map<string, Cached<number>>()
  const fresh = <A>(cache: Map<string, Cached<A>>, key: string, now: number): Cached<A> | undefined => {
    const hit = cache.get(key)
    if (hit === undefined) return undefined
    if (now - hit.at < ttl) return hit
    cache.delete(key)
    return undefined
  }
  const put = <A>(cache: Map<string, Cached<A>>, key: string, value: A, now: number) => {
    cache.delete(key)
    cache.set(key, { value, at: now })
    while (cache.size > size) cache.delete(cache.keys().next().value!)
  }
  const store = (tenant: string): Store => namespace.get(namespace.idFromName(KeyStorage.objectName(tenant)))
  const unwrap = async (generation: number, wrapped: string) =>
    FieldCipher.importKey(generation, unb64(await SecretBox.open(await SecretBox.importKey(config.secretsKey), wrapped)))
  const keyId = (tenant: string, subject: string, generation: number) => `${tenant}\u0000${subject}\u0000${generation}`

  /** The keys to seal with, by subject: from the cache, else one `currentKeys` call for all the missing. */
  const sealingKeys = async (tenant: string, subjects: ReadonlySet<string>): Promise<Map<string, FieldCipher.SubjectKey>> => {
    const now = Date.now()
    const out = new Map<string, FieldCipher.SubjectKey>()
    const missing: Array<string> = []
    for (const subject of subjects) {
      const generation = fresh(current, `${tenant}\u0000${subject}`, now)?.value
      const key = generation === undefined ? undefined : fresh(keys, keyId(tenant, subject, generation), now)?.value
      if (key) out.set(subject, key)
      else missing.push(subject)
    }
    if (missing.length === 0) return out
    const platformKey = await SecretBox.importKey(config.secretsKey)
    const requests = await Promise.all(missing.map(async (subject) => ({ subject, wrapped: await SecretBox.seal(platformKey, b64(FieldCipher.newKeyMaterial())) })))
    const answers = await store(tenant).currentKeys(requests, { refuseErased: config.refuseErased?.(tenant) ?? false, now: new Date(now).toISOString() })
    for (const answer of answers) {
      if ("refused" in answer) throw new SubjectErased(answer.subject, answer.erasedAt)
      const subjectKey = await unwrap(answer.generation, answer.wrapped)
      put(current, `${tenant}\u0000${answer.subject}`, answer.generation, now)
      put(keys, keyId(tenant, answer.subject, answer.generation), subjectKey, now)
      out.set(answer.subject, subjectKey)
    }
    return out
  }

  /**
   * One `readKeys` call per tenant for the reads asked in the same turn (a consumer decodes its messages
   * concurrently, each opening its own payload): the first read of a turn waits for the turn to end, then asks for all.
   */
  const pendingReads = new Map<string, { refs: Array<KeyStorage.KeyRef>; answers: Promise<ReadonlyArray<KeyStorage.KeyAnswer>> }>()
  const readCoalesced = async (tenant: string, refs: ReadonlyArray<KeyStorage.KeyRef>): Promise<ReadonlyArray<KeyStorage.KeyAnswer>> => {
    let pending = pendingReads.get(tenant)
    if (pending === undefined) {
      const batch: Array<KeyStorage.KeyRef> = []
      const answers = new Promise<ReadonlyArray<KeyStorage.KeyAnswer>>((resolve, reject) =>
        setTimeout(() => {
          pendingReads.delete(tenant)
          store(tenant).readKeys(batch).then(resolve, reject)
        }, 0))
      pending = { refs: batch, answers }
      pendingReads.set(tenant, pending)
    }
    for (const ref of refs) if (!pending.refs.some((r) => r.subject === ref.subject && r.generation === ref.generation)) pending.refs.push(ref)
    const all = await pending.answers
    return all.filter((a) => refs.some((r) => r.subject === a.subject && r.generation === a.generation))
  }

  /** The keys to open with (null: erased or unknown): from the cache, else one `readKeys` call for all the missing. */
  const openingKeys = async (tenant: string, refs: ReadonlyArray<KeyStorage.KeyRef>): Promise<Map<string, FieldCipher.SubjectKey | null>> => {
    const now = Date.now()
    const out = new Map<string, FieldCipher.SubjectKey | null>()
    const missing: Array<KeyStorage.KeyRef> = []
    for (const ref of refs) {
      const id = keyId(tenant, ref.subject, ref.generation)
      if (out.has(id)) continue
      const hit = fresh(keys, id, now)
      if (hit !== undefined) out.set(id, hit.value)
      else if (!missing.some((m) => m.subject === ref.subject && m.generation === ref.generation)) missing.push(ref)
    }
    if (missing.length === 0) return out
    const answers = await readCoalesced(tenant, missing)
    for (const answer of answers) {
      const id = keyId(tenant, answer.subject, answer.generation)
      const subjectKey = answer.wrapped === null ? null : await unwrap(answer.generation, answer.wrapped)
      put(keys, id, subjectKey, now)
      out.set(id, subjectKey)
    }
    return out
  }

  const subjectOf = (item: Item): string | undefined => {
    const subject = item.value[item.declaration.subject]
    return typeof subject === "string" ? subject : undefined
  }
  const needsSeal = (value: unknown) => typeof value === "string" && value !== erased && FieldCipher.generationOf(value) === undefined

  const seal: KeyRing["Service"]["seal"] = (tenant, items) => {
    const subjects = new Set<string>()
    for (const item of items) {
      const subject = subjectOf(item)
      if (subject !== undefined && item.declaration.fields.some((f) => needsSeal(item.value[f]))) subjects.add(subject)
    }
    if (subjects.size === 0) return Effect.succeed(items.map((i) => i.value as Record<string, unknown>))
    return Effect.tryPromise({
      try: async () => {
        const byKey = await sealingKeys(tenant, subjects)
        return Promise.all(items.map(async (item) => {
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
      },
      catch: (error) =>
        error instanceof SubjectErased
          ? new Failure.InvalidInput({ code: "subject_erased", message: error.message, problems: [] })
          : unavailable(error)
    })
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
    return Effect.tryPromise({
      try: async () => {
        const byId = await openingKeys(tenant, refs)
        return Promise.all(items.map(async (item) => {
          const subject = subjectOf(item)
          if (subject === undefined) return item.value as Record<string, unknown>
          let out: Record<string, unknown> | undefined
          for (const field of item.declaration.fields) {
            const value = item.value[field]
            const generation = FieldCipher.generationOf(value)
            if (generation === undefined) continue
            const key = byId.get(keyId(tenant, subject, generation)) ?? null
            out ??= { ...item.value }
            out[field] = key === null ? erased : (await FieldCipher.open(key, tenant, subject, field, value as string)) ?? erased
          }
          return out ?? item.value as Record<string, unknown>
        }))
      },
      catch: unavailable
    })
  }

  return {
    seal,
    open,
    cacheBoundMs: ttl,
    erase: (tenant, subject, now) =>
      Effect.tryPromise({
        try: async () => {
          const answer = await store(tenant).eraseKeys(subject, now)
          current.delete(`${tenant}\u0000${subject}`)
          for (const generation of answer.generations) keys.delete(keyId(tenant, subject, generation))
          return answer
        },
        catch: unavailable
      })
  }
}
