/**
 * The platform's secret box: values sealed with AES-256-GCM (
 * a fresh 96-bit IV per value, the key from the Worker secret
 * `FACTLINE_SECRETS_KEY`: base64 of 32 bytes) — webhook signing secrets
 * (webhooks/Secrets.ts) and data subject keys (personal/KeyRing.ts). Sealed values are
 * `v1.<iv>.<ciphertext>` in base64url; opening checks the GCM tag, so a
 * tampered or foreign value is refused, never returned garbled.
 */
import * as Failure from "../failures/Failure.js"

/** The platform's secrets key is missing or wrong (or a sealed value was altered): an operator must fix the configuration. */
export class SecretsKeyError extends Error implements Failure.Failure {
  override readonly name = "SecretsKeyError"
  readonly _tag = "SecretsKeyError"
  readonly [Failure.TypeId] = Failure.TypeId
  readonly status = 503
  readonly code = "unavailable"
  readonly retryable = true
  readonly reason = "retries_exhausted" as const
  readonly retryAfterSeconds = 60
  readonly publicMessage = "secrets cannot be used: the platform's secrets key is not configured"
}

/** Base64 of bytes (a loop, not a spread: any length). */
export const b64 = (bytes: Uint8Array): string => {
  let binary = ""
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]!)
  return btoa(binary)
}
export const unb64 = (text: string): Uint8Array => Uint8Array.from(atob(text), (c) => c.charCodeAt(0))
/** Base64url without padding, and back. */
export const b64url = (bytes: Uint8Array): string => b64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
export const unb64url = (text: string): Uint8Array => unb64(text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4))

const keys = new Map<string, Promise<CryptoKey>>()

/** The AES-GCM key from its base64 form (cached per isolate). Throws SecretsKeyError if missing or not 32 bytes. */
export const importKey = (base64Key: string | undefined): Promise<CryptoKey> => {
  if (base64Key === undefined || base64Key === "") {
    return Promise.reject(new SecretsKeyError("FACTLINE_SECRETS_KEY is not set: webhook secrets and personal data keys cannot be stored (set a base64 32-byte key with `wrangler secret put FACTLINE_SECRETS_KEY`)"))
  }
  let key = keys.get(base64Key)
  if (key === undefined) {
    key = (async () => {
      let raw: Uint8Array
      try {
        raw = unb64(base64Key)
      } catch {
        throw new SecretsKeyError("FACTLINE_SECRETS_KEY is not valid base64")
      }
      if (raw.byteLength !== 32) throw new SecretsKeyError(`FACTLINE_SECRETS_KEY must be 32 bytes (base64); it is ${raw.byteLength}`)
      return crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"])
    })()
    key.catch(() => keys.delete(base64Key))
    keys.set(base64Key, key)
  }
  return key
}

export const seal = async (key: CryptoKey, plaintext: string): Promise<string> => {
  const iv = crypto.getRandomValues(new Uint8Array(12))
  const ciphertext = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, new TextEncoder().encode(plaintext)))
  return `v1.${b64url(iv)}.${b64url(ciphertext)}`
}

export const open = async (key: CryptoKey, sealed: string): Promise<string> => {
  const [version, iv, ciphertext] = sealed.split(".")
  if (version !== "v1" || iv === undefined || ciphertext === undefined) throw new SecretsKeyError("not a sealed secret")
  try {
    const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: unb64url(iv) }, key, unb64url(ciphertext))
    return new TextDecoder().decode(plain)
  } catch {
    throw new SecretsKeyError("a stored secret could not be decrypted (FACTLINE_SECRETS_KEY changed, or the value was altered)")
  }
}

