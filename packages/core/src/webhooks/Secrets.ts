/**
 * Endpoint signing secrets: generated as Standard Webhooks secrets
 * (`whsec_` + base64 of 32 random bytes), stored only sealed by the platform's
 * secret box (platform/SecretBox.ts: AES-256-GCM under `FACTLINE_SECRETS_KEY`).
 */
import { b64 } from "../platform/SecretBox.js"

export { importKey, open, seal, SecretsKeyError } from "../platform/SecretBox.js"

/** A new Standard Webhooks signing secret: `whsec_` + base64 of 32 random bytes. */
export const generateSigningSecret = (): string => `whsec_${b64(crypto.getRandomValues(new Uint8Array(32)))}`

/** A new random base64 key for FACTLINE_SECRETS_KEY. */
export const generateKey = (): string => b64(crypto.getRandomValues(new Uint8Array(32)))
