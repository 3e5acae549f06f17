/**
 * The ledger with personal data sealed on the way in: every append — a handler's or decider's facts, a
 * processor's, a workflow's, a timer's carried fact — has the personal fields of its facts sealed under their
 * data subjects' keys (personal/KeyRing.ts) before it reaches a shard, so the shards, the relay, the facts copy,
 * the archive and every queue hold ciphertext only. Readers open facts where product code sees them
 * (personal/Sealing.ts). A tenant whose keys cannot be had fails only its own groups (`unavailable`: retried),
 * like a shard that cannot be reached.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import { KeyRing } from "../personal/KeyRing.js"
import * as Sealing from "../personal/Sealing.js"
import { type AppendOutcome, Ledger } from "./Ledger.js"
import type { AppendGroup } from "./LedgerProtocol.js"

/** `ledger` with sealing appends, by the fact types' declarations (`declarationOf`); unchanged when no type declares personal data. */
export const layer = (declarationOf: Sealing.DeclarationOf, anyDeclared: boolean) =>
  Layer.effect(Ledger, Effect.gen(function*() {
    const inner = yield* Ledger
    if (!anyDeclared) return inner
    const keyRing = yield* KeyRing
    const append: Ledger["Service"]["append"] = Effect.fn("Ledger.append.sealed")(function*(groups) {
      const byTenant = new Map<string, Array<number>>()
      groups.forEach((g, i) => {
        const list = byTenant.get(g.tenant_id)
        if (list) list.push(i)
        else byTenant.set(g.tenant_id, [i])
      })
      const sealed: Array<AppendGroup | undefined> = [...groups]
      const failed = new Map<number, AppendOutcome>()
      yield* Effect.forEach([...byTenant], ([tenant, indexes]) =>
        Effect.gen(function*() {
          const facts = indexes.flatMap((i) => groups[i]!.facts)
          const result = yield* Effect.result(Sealing.seal(keyRing, declarationOf, tenant, facts))
          if (Result.isFailure(result)) {
            for (const i of indexes) {
              failed.set(i, { status: "unavailable", message: `personal data could not be sealed: ${result.failure.message}` })
              sealed[i] = undefined
            }
            return
          }
          let at = 0
          for (const i of indexes) {
            const group = groups[i]!
            sealed[i] = { ...group, facts: result.success.slice(at, at + group.facts.length) }
            at += group.facts.length
          }
        }), { concurrency: "unbounded", discard: true })
      const toAppend = sealed.filter((g): g is AppendGroup => g !== undefined)
      const appended = toAppend.length === 0 ? [] : yield* inner.append(toAppend)
      let next = 0
      return groups.map((_, i) => failed.get(i) ?? appended[next++]!)
    })
    return { ...inner, append }
  }))
