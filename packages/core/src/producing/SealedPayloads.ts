/**
 * The producer's sealing of personal data (personal/KeyRing.ts): every payload whose definition declares personal
 * fields has them sealed under its data subject's key before it is hashed, kept, offloaded or sent.
 */
import * as Effect from "effect/Effect"
import type { MessageDefinition } from "../definitions/MessageDefinition.js"
import type { KeyRing } from "../personal/KeyRing.js"
import type * as KeyStorage from "../personal/KeyStorage.js"
import * as Failure from "../failures/Failure.js"
import { invalidMessages, type Validated } from "./ProducerInput.js"

/**
 * The envelopes with their payloads' personal fields sealed (KeyRing: one key store call per tenant at most),
 * before anything is hashed, kept, offloaded or sent: no store ever holds them in plaintext. The same array when
 * no definition declares personal data.
 */
export const sealAll = (keyRing: KeyRing["Service"], definitions: ReadonlyMap<string, MessageDefinition>, validated: Validated, pathPrefix?: string) =>
  Effect.gen(function*() {
    const { envelopes } = validated
    const byTenant = new Map<string, Array<number>>()
    envelopes.forEach((e, i) => {
      if (e.payload === undefined || definitions.get(e.message_type)?.personalData === undefined) return
      const list = byTenant.get(e.tenant_id)
      if (list) list.push(i)
      else byTenant.set(e.tenant_id, [i])
    })
    if (byTenant.size === 0) return validated
    const out = [...envelopes]
    yield* Effect.forEach([...byTenant], ([tenant, indexes]) =>
      Effect.map(
        keyRing.seal(tenant, indexes.map((i) => ({ declaration: definitions.get(envelopes[i]!.message_type)!.personalData!, value: envelopes[i]!.payload as Record<string, unknown> }))),
        (sealed) => indexes.forEach((index, i) => (out[index] = { ...envelopes[index]!, payload: sealed[i] }))
      ).pipe(Effect.mapError((error) =>
        // An erased subject the tenant refuses: the problem names the event's subject field, as a validation problem would.
        error instanceof Failure.InvalidInput && error.code === "subject_erased"
          ? invalidMessages((error.problems ?? []).map((p) => {
            const [at, ...field] = p.path.split(".")
            return { path: [...(pathPrefix === undefined ? [] : [pathPrefix, indexes[Number(at)]]), "payload", ...field].join("."), message: p.message }
          }))
          : error)), { concurrency: "unbounded", discard: true })
    return { ...validated, envelopes: out }
  })

/** No key store: a producer whose definitions declare no personal data never asks for a key. */
export const noKeyStores: KeyStorage.KeyStoreNamespace = {
  idFromName: () => {
    throw new Error("no key store: this producer was given no keys")
  },
  get: () => {
    throw new Error("no key store: this producer was given no keys")
  }
}

