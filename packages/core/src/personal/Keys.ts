/**
 * The key ring's keys: fetched from the tenant's key store object (KeyStorage), unwrapped with the platform key
 * (platform/SecretBox.ts), and cached in the isolate — `ttlMs` each, at most `size` of them (oldest out first),
 * erased ones too. Reads asked in the same turn go to the store as one `readKeys` call per tenant (a consumer
 * decodes its messages concurrently, each opening its own payload). Every call is given the time (`now`, ms).
 */
import * as FieldCipher from "./FieldCipher.js"
import * as KeyStorage from "./KeyStorage.js"
import * as SecretBox from "../platform/SecretBox.js"

/** A data subject erased before, in a tenant that refuses new personal data of an erased subject. */
export class SubjectErased extends Error {
  override readonly name = "SubjectErased"
  constructor(readonly subject: string, readonly erasedAt: string) {
    super(`data subject ${JSON.stringify(subject)} was erased (${erasedAt}); this tenant refuses new personal data of an erased subject`)
  }
}

export interface Options {
  readonly secretsKey: string | undefined
  readonly ttlMs: number
  readonly size: number
  readonly refuseErased: (tenant: string) => boolean
}

interface Cached<A> {
  readonly value: A
  readonly at: number
}


export const keyId = (tenant: string, subject: string, generation: number) => `${tenant}\u0000${subject}\u0000${generation}`

/** A cache of values by key, each kept `ttlMs`, at most `size` (the oldest written out first). */
class Cache<A> {
  private readonly entries = new Map<string, Cached<A>>()
  constructor(private readonly ttlMs: number, private readonly size: number) {}
  get(key: string, now: number): Cached<A> | undefined {
    const hit = this.entries.get(key)
    if (hit === undefined) return undefined
    if (now - hit.at < this.ttlMs) return hit
    this.entries.delete(key)
    return undefined
  }
  set(key: string, value: A, now: number) {
    this.entries.delete(key)
    this.entries.set(key, { value, at: now })
    while (this.entries.size > this.size) this.entries.delete(this.entries.keys().next().value!)
  }
  delete(key: string) {
    this.entries.delete(key)
  }
}

export interface Keys {
  /** The keys to seal with, by subject (created on first use; SubjectErased where the tenant refuses). */
  readonly sealing: (tenant: string, subjects: ReadonlySet<string>, now: number) => Promise<Map<string, FieldCipher.SubjectKey>>
  /** The keys to open with, by `keyId` (null: erased or unknown). */
  readonly opening: (tenant: string, refs: ReadonlyArray<KeyStorage.KeyRef>, now: number) => Promise<Map<string, FieldCipher.SubjectKey | null>>
  /** Destroys the subject's keys in its store and drops them from this isolate's cache. */
  readonly erase: (tenant: string, subject: string, now: string) => Promise<KeyStorage.EraseAnswer>
  /** The subject's key generations, as its store has them (not cached). */
  readonly state: (tenant: string, subject: string) => Promise<KeyStorage.KeyState>
}

export const make = (options: Options, namespace: KeyStorage.KeyStoreNamespace): Keys => {
  const keys = new Cache<FieldCipher.SubjectKey | null>(options.ttlMs, options.size)
  const current = new Cache<number>(options.ttlMs, options.size)
  const store = (tenant: string) => namespace.get(namespace.idFromName(KeyStorage.objectName(tenant)))
  const unwrap = async (generation: number, wrapped: string) =>
    FieldCipher.importKey(generation, SecretBox.unb64(await SecretBox.open(await SecretBox.importKey(options.secretsKey), wrapped)))

  /**
   * One `readKeys` call per tenant for the reads asked together: a consumer decodes its messages concurrently, each
   * opening its own payload. A read waits for the turn to end — and for the tenant's read in flight, if any — then
   * asks for everything gathered meanwhile, so a batch's cold reads are one or two calls, not one per message.
   */
  const pendingReads = new Map<string, { refs: Array<KeyStorage.KeyRef>; answers: Promise<ReadonlyArray<KeyStorage.KeyAnswer>> }>()
  const inFlight = new Map<string, Promise<unknown>>()
  const readCoalesced = async (tenant: string, refs: ReadonlyArray<KeyStorage.KeyRef>): Promise<ReadonlyArray<KeyStorage.KeyAnswer>> => {
    let pending = pendingReads.get(tenant)
    if (pending === undefined) {
      const batch: Array<KeyStorage.KeyRef> = []
      const before = inFlight.get(tenant) ?? Promise.resolve()
      const answers = new Promise<void>((resolve) => setTimeout(resolve, 0))
        .then(() => before.catch(() => undefined))
        .then(() => {
          pendingReads.delete(tenant)
          return store(tenant).readKeys(batch)
        })
      const settled = answers.catch(() => undefined).finally(() => {
        if (inFlight.get(tenant) === settled) inFlight.delete(tenant)
      })
      inFlight.set(tenant, settled)
      pending = { refs: batch, answers }
      pendingReads.set(tenant, pending)
    }
    for (const ref of refs) if (!pending.refs.some((r) => r.subject === ref.subject && r.generation === ref.generation)) pending.refs.push(ref)
    const all = await pending.answers
    return all.filter((a) => refs.some((r) => r.subject === a.subject && r.generation === a.generation))
  }

  const sealing: Keys["sealing"] = async (tenant, subjects, now) => {
    const out = new Map<string, FieldCipher.SubjectKey>()
    const missing: Array<string> = []
    for (const subject of subjects) {
      const generation = current.get(`${tenant}\u0000${subject}`, now)?.value
      const key = generation === undefined ? undefined : keys.get(keyId(tenant, subject, generation), now)?.value
      if (key) out.set(subject, key)
      else missing.push(subject)
    }
    if (missing.length === 0) return out
    const platformKey = await SecretBox.importKey(options.secretsKey)
    const requests = await Promise.all(missing.map(async (subject) => ({ subject, wrapped: await SecretBox.seal(platformKey, SecretBox.b64(FieldCipher.newKeyMaterial())) })))
    const answers = await store(tenant).currentKeys(requests, { refuseErased: options.refuseErased(tenant), now: new Date(now).toISOString() })
    for (const answer of answers) {
      if ("refused" in answer) throw new SubjectErased(answer.subject, answer.erasedAt)
      const subjectKey = await unwrap(answer.generation, answer.wrapped)
      current.set(`${tenant}\u0000${answer.subject}`, answer.generation, now)
      keys.set(keyId(tenant, answer.subject, answer.generation), subjectKey, now)
      out.set(answer.subject, subjectKey)
    }
    return out
  }

  const opening: Keys["opening"] = async (tenant, refs, now) => {
    const out = new Map<string, FieldCipher.SubjectKey | null>()
    const missing: Array<KeyStorage.KeyRef> = []
    for (const ref of refs) {
      const id = keyId(tenant, ref.subject, ref.generation)
      if (out.has(id)) continue
      const hit = keys.get(id, now)
      if (hit !== undefined) out.set(id, hit.value)
      else if (!missing.some((m) => m.subject === ref.subject && m.generation === ref.generation)) missing.push(ref)
    }
    if (missing.length === 0) return out
    for (const answer of await readCoalesced(tenant, missing)) {
      const id = keyId(tenant, answer.subject, answer.generation)
      const subjectKey = answer.wrapped === null ? null : await unwrap(answer.generation, answer.wrapped)
      keys.set(id, subjectKey, now)
      out.set(id, subjectKey)
    }
    return out
  }

  const erase: Keys["erase"] = async (tenant, subject, now) => {
    const answer = await store(tenant).eraseKeys(subject, now)
    current.delete(`${tenant}\u0000${subject}`)
    for (const generation of answer.generations) keys.delete(keyId(tenant, subject, generation))
    return answer
  }

  return { sealing, opening, erase, state: (tenant, subject) => store(tenant).keyState(subject) }
}
