/**
 * One personal value sealed under its data subject's key: AES-256-GCM through WebCrypto, with a synthetic IV
 * (the first 96 bits of HMAC-SHA-256 over the field name and the plaintext, under a second key derived from the
 * same subject key). The same value in the same field under the same key seals to the same text — so a
 * redelivered or re-sent event hashes the same (idempotency keeps its 422 on a conflicting reuse, and compares
 * only what erasure destroys: the hash covers ciphertext, a keyed function of the value) — while anyone without
 * the key learns nothing but equality within one subject's field. The additional data binds a sealed value to
 * its tenant, subject, key generation and field: moved elsewhere, it does not open.
 *
 * A sealed value is `pd1.<generation>.<base64url(iv ‖ ciphertext ‖ tag)>`. The generation names the subject's
 * key: erasure destroys it; a later event of the subject gets a new one (KeyStorage.ts).
 */
import { b64url, unb64url } from "../platform/SecretBox.js"

/** The two keys derived from one data subject key: AES-GCM to seal, HMAC to make the IV. */
export interface SubjectKey {
  readonly generation: number
  readonly seal: CryptoKey
  readonly iv: CryptoKey
  /**
   * What this key sealed or opened lately (`field\0plaintext` → sealed text, at most `memoSize`): sealing is
   * deterministic, so a value opened from a message and appended again in a fact reuses its sealed text, no crypto.
   * It lives and goes with the key (the isolate's key cache: erasure drops both).
   */
  readonly memo: Map<string, string>
  /** The other way: `field\0sealed text` → plaintext, so the consumers after the first open a value with no crypto either. */
  readonly opened: Map<string, string>
}

const memoSize = 256
const remember = (key: SubjectKey, field: string, plaintext: string, sealed: string) => {
  if (key.memo.size >= memoSize) key.memo.delete(key.memo.keys().next().value!)
  if (key.opened.size >= memoSize) key.opened.delete(key.opened.keys().next().value!)
  key.memo.set(`${field}\u0000${plaintext}`, sealed)
  key.opened.set(`${field}\u0000${sealed}`, plaintext)
}

const prefix = "pd1."
const encoder = new TextEncoder()
const decoder = new TextDecoder()


/** 32 random bytes: a new data subject key (kept only wrapped by the platform key). */
export const newKeyMaterial = (): Uint8Array => crypto.getRandomValues(new Uint8Array(32))

/** The subject key's two working keys (HKDF-SHA-256 from its 32 bytes, one info string each). */
export const importKey = async (generation: number, material: Uint8Array): Promise<SubjectKey> => {
  const base = await crypto.subtle.importKey("raw", material, "HKDF", false, ["deriveKey"])
  const derive = (info: string, algorithm: { readonly name: string; readonly length: number; readonly hash?: string }, usages: Array<"encrypt" | "decrypt" | "sign">) =>
    crypto.subtle.deriveKey({ name: "HKDF", hash: "SHA-256", salt: new Uint8Array(0), info: encoder.encode(info) }, base, algorithm, false, usages)
  const [seal, iv] = await Promise.all([
    derive("factline personal seal", { name: "AES-GCM", length: 256 }, ["encrypt", "decrypt"]),
    derive("factline personal iv", { name: "HMAC", hash: "SHA-256", length: 256 }, ["sign"])
  ])
  return { generation, seal, iv, memo: new Map(), opened: new Map() }
}

/** Whether a value is sealed personal data (and the generation of the key it needs). */
export const generationOf = (value: unknown): number | undefined => {
  if (typeof value !== "string" || !value.startsWith(prefix)) return undefined
  const dot = value.indexOf(".", prefix.length)
  if (dot < 0) return undefined
  const generation = Number(value.slice(prefix.length, dot))
  return Number.isInteger(generation) && generation > 0 ? generation : undefined
}

const context = (tenant: string, subject: string, generation: number, field: string) =>
  encoder.encode(`${tenant}\u0000${subject}\u0000${generation}\u0000${field}`)

/** Seals one value (deterministic under its key, field and context). */
export const seal = async (key: SubjectKey, tenant: string, subject: string, field: string, plaintext: string): Promise<string> => {
  const known = key.memo.get(`${field}\u0000${plaintext}`)
  if (known !== undefined) return known
  const text = encoder.encode(plaintext)
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key.iv, encoder.encode(`${field}\u0000${plaintext}`)))
  const iv = mac.slice(0, 12)
  const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: context(tenant, subject, key.generation, field) }, key.seal, text))
  const out = new Uint8Array(12 + sealed.length)
  out.set(iv, 0)
  out.set(sealed, 12)
  const sealedText = `${prefix}${key.generation}.${b64url(out)}`
  remember(key, field, plaintext, sealedText)
  return sealedText
}

/** Opens a sealed value; undefined when it does not open under this key (altered, or sealed elsewhere). */
export const open = async (key: SubjectKey, tenant: string, subject: string, field: string, sealed: string): Promise<string | undefined> => {
  const known = key.opened.get(`${field}\u0000${sealed}`)
  if (known !== undefined) return known
  const dot = sealed.indexOf(".", prefix.length)
  try {
    const bytes = unb64url(sealed.slice(dot + 1))
    const plain = await crypto.subtle.decrypt(
      { name: "AES-GCM", iv: bytes.slice(0, 12), additionalData: context(tenant, subject, key.generation, field) },
      key.seal,
      bytes.slice(12)
    )
    const text = decoder.decode(plain)
    remember(key, field, text, sealed)
    return text
  } catch {
    return undefined
  }
}
