/**
 * The outbox relay: drains a shard's outbox to the downstream queues — the
 * fallback for facts a consumer could not send itself (see FactRelay).
 *
 * Rows are packed several facts to a message (FactMessage.pack) and sent to
 * each destination (the shard's tenant's group queue: Queues.route) through
 * the queues' door, which splits them within the queue's limits and counts
 * them; the rows of the messages on the queue are deleted, in one statement,
 * once the send resolved — on a failed send those of the calls before it, and
 * the failure is raised: the caller (the shard's alarm) re-arms with backoff.
 * A crash between a send and its delete re-sends those facts later; every
 * consumer dedupes by fact id, so that changes nothing.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { Fact } from "@factline/schemas"
import type { LedgerStorage } from "../ledger/LedgerStorage.js"
import { Queues } from "../platform/Queues.js"
import { PayloadStore } from "../producing/PayloadStore.js"
import * as FactMessage from "./FactMessage.js"

/** Rows relayed per alarm run; the alarm re-arms at once while rows remain. */
export const rowsPerRun = 500

export interface RelayResult {
  readonly sent: number
  readonly remaining: number
}

/** Relays up to `limit` of the outbox's rows of `tenantId`'s shard `ledger`; fails with the first send that failed. */
export const relay = Effect.fn("OutboxRelay.relay")(function*(ledger: LedgerStorage, tenantId: string, limit: number = rowsPerRun) {
  const queues = yield* Queues
  const payloads = yield* PayloadStore
  const offload = (tenant: string, name: string, payload: unknown) => Effect.runPromise(payloads.put(tenant, name, payload))
  const entries = ledger.pendingOutbox(limit)
  const byDestination = new Map<string, Array<(typeof entries)[number]>>()
  for (const entry of entries) {
    const rows = byDestination.get(entry.destination)
    if (rows) rows.push(entry)
    else byDestination.set(entry.destination, [entry])
  }
  let sent = 0
  for (const [destination, rows] of byDestination) {
    const rowIds = new Map<Fact, number>(rows.map((row) => [row.fact, row.id]))
    const messages = yield* Effect.tryPromise(() => FactMessage.pack(rows.map((row) => row.fact), offload))
    const result = yield* Effect.result(queues.send(queues.route(destination, tenantId), messages.map((m) => m.body), { sizes: messages.map((m) => m.bytes) }))
    const onQueue = Result.isFailure(result) ? result.failure.sent : messages.length
    const ids = messages.slice(0, onQueue).flatMap((m) => m.facts.map((f) => rowIds.get(f)!))
    ledger.deleteOutbox(ids)
    sent += ids.length
    if (Result.isFailure(result)) return yield* result.failure
  }
  return { sent, remaining: ledger.outboxSize() } satisfies RelayResult
})
