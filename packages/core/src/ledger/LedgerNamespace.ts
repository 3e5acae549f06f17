/**
 * The LedgerShard Durable Object namespace as the ledger calls it: a shard's
 * stub by shard key, answering the shard protocol (`LedgerShardRpc`). A
 * Worker's `DurableObjectNamespace` of LedgerShard is one; so is the test
 * kit's in-memory namespace (`testing/MemoryBindings`).
 *
 * It is the one binding whose service is not in `platform/Bindings`: its type
 * is the ledger's protocol, and the platform folder sits below the ledger.
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import type { LedgerShardRpc } from "./LedgerProtocol.js"

/** The part of a `DurableObjectNamespace` the ledger uses, with stubs typed by the shard protocol. */
export interface LedgerShardNamespace {
  idFromName(name: string): DurableObjectId
  get(id: DurableObjectId): LedgerShardRpc
}

export class LedgerNamespace extends Context.Service<LedgerNamespace, {
  readonly namespace: LedgerShardNamespace
}>()("@factline/core/LedgerNamespace") {
  static readonly layer = (namespace: LedgerShardNamespace) => Layer.succeed(LedgerNamespace, { namespace })
}
