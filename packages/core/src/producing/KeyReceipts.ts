/**
 * Key receipts: the HTTP edge's proof, carried on the envelope (`key_receipt`), that it bound the message's
 * idempotency key to this payload before sending it — so the events consumer need not bind it again.
 *
 * The edge binds every key it accepts (`AcceptedKeys.record`, one D1 round trip per request) and refuses a
 * request whose key is bound to another payload. The events consumer binds keys too (`claim`), for messages
 * that never passed the edge (a service's `emit` through the queue binding). For a message the edge accepted,
 * that second claim can only find the binding the edge made — yet it was a whole round of the events stage
 * (issue 41). A receipt lets the consumer skip it: `kr1.<base64url>`, an HMAC-SHA-256 (truncated to 128 bits)
 * over `tenant, idempotency_key, payload_hash` under a key derived (HKDF, its own info string) from the
 * platform's `FACTLINE_SECRETS_KEY`. Nothing outside the platform can make one, and it proves exactly the
 * binding the claim would have returned: the key bound to this payload's hash.
 *
 * What it does not change: a message without a receipt, or whose receipt does not verify (another key, an
 * altered payload, a rotated secrets key), is claimed as before; a tenant whose writes are held (a move, a
 * deletion) holds receipted messages too (AcceptedKeys.claim checks the placement for every entry); and
 * the ledger's deterministic fact ids still make a redelivery append nothing. Without a secrets key there
 * are no receipts, and every message is claimed.
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import { b64url, unb64, unb64url } from "../platform/SecretBox.js"

/** What a receipt covers: the key and the hash of the payload it is bound to, in its tenant. */
export interface Binding {
  readonly tenant_id: string
  readonly idempotency_key: string
  readonly payload_hash: string
}

export interface Shape {
  /** The receipt of a binding, or undefined when receipts are off (no secrets key). */
  readonly sign: (binding: Binding) => Promise<string | undefined>
  /** Whether `receipt` is this binding's (false for a malformed or foreign one, or when receipts are off). */
  readonly verify: (binding: Binding, receipt: string) => Promise<boolean>
}

const prefix = "kr1."
const macBytes = 16
const encoder = new TextEncoder()

const message = (b: Binding) => encoder.encode(`${b.tenant_id}\u0000${b.idempotency_key}\u0000${b.payload_hash}`)

/** Receipts off: nothing signed, nothing verified. */
export const none: Shape = { sign: () => Promise.resolve(undefined), verify: () => Promise.resolve(false) }

/** The HMAC key derived from the platform's secrets key (base64 of 32 bytes), or undefined when it is missing or malformed. */
const deriveKey = async (secretsKey: string | undefined): Promise<CryptoKey | undefined> => {
  if (secretsKey === undefined || secretsKey === "") return undefined
  let raw: Uint8Array
  try {
    raw = unb64(secretsKey)
  } catch {
    return undefined
  }
  if (raw.byteLength !== 32) return undefined
  const base = await crypto.subtle.importKey("raw", raw, "HKDF", false, ["deriveKey"])
  return crypto.subtle.deriveKey(
    { name: "HKDF", hash: "SHA-256", salt: new Uint8Array(0), info: encoder.encode("factline/key-receipt/v1") },
    base,
    { name: "HMAC", hash: "SHA-256", length: 256 },
    false,
    ["sign", "verify"]
  )
}

/** Receipts under the platform's secrets key (none without one: every message is then claimed). */
export const make = (secretsKey: string | undefined): Shape => {
  const key = deriveKey(secretsKey)
  const mac = async (k: CryptoKey, b: Binding) => new Uint8Array(await crypto.subtle.sign("HMAC", k, message(b))).subarray(0, macBytes)
  return {
    sign: async (binding) => {
      const k = await key
      return k === undefined ? undefined : prefix + b64url(await mac(k, binding))
    },
    verify: async (binding, receipt) => {
      const k = await key
      if (k === undefined || !receipt.startsWith(prefix)) return false
      let given: Uint8Array
      try {
        given = unb64url(receipt.slice(prefix.length))
      } catch {
        return false
      }
      if (given.byteLength !== macBytes) return false
      const expected = await mac(k, binding)
      // Constant time over the fixed length.
      let diff = 0
      for (let i = 0; i < macBytes; i++) diff |= given[i]! ^ expected[i]!
      return diff === 0
    }
  }
}

export class KeyReceipts extends Context.Service<KeyReceipts, Shape>()("@factline/core/KeyReceipts") {
  static readonly layer = (secretsKey: string | undefined) => Layer.sync(KeyReceipts, () => make(secretsKey))
  static readonly none = Layer.succeed(KeyReceipts, none)
}
