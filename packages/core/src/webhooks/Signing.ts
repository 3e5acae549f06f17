/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): the
 * signed content is `${webhook-id}.${webhook-timestamp}.${body}`, the key the
 * base64 part of the `whsec_…` secret, the algorithm HMAC-SHA256; the header
 * is `v1,<base64 signature>`, several space-separated while a rotated secret
 * still signs. Receivers verify with any Standard Webhooks library.
 */
const keyCache = new Map<string, Promise<CryptoKey>>()

const hmacKey = (secret: string): Promise<CryptoKey> => {
  let key = keyCache.get(secret)
  if (key === undefined) {
    const raw = Uint8Array.from(atob(secret.startsWith("whsec_") ? secret.slice(6) : secret), (c) => c.charCodeAt(0))
    key = crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"])
    if (keyCache.size > 1_000) keyCache.clear()
    keyCache.set(secret, key)
  }
  return key
}

/** `v1,<base64 HMAC-SHA256>` of one secret. */
export const sign = async (secret: string, id: string, timestampSeconds: number, body: string): Promise<string> => {
  const mac = await crypto.subtle.sign("HMAC", await hmacKey(secret), new TextEncoder().encode(`${id}.${timestampSeconds}.${body}`))
  return `v1,${btoa(String.fromCharCode(...new Uint8Array(mac)))}`
}

/** The three Standard Webhooks headers, signed with every given secret (current first). */
export const headers = async (secrets: ReadonlyArray<string>, id: string, timestampSeconds: number, body: string): Promise<Record<string, string>> => ({
  "webhook-id": id,
  "webhook-timestamp": String(timestampSeconds),
  "webhook-signature": (await Promise.all(secrets.map((s) => sign(s, id, timestampSeconds, body)))).join(" ")
})
