/**
 * The outbox relay: drains a shard's outbox to the downstream queues.
 *
 * Rows are sent with `sendBatch` (≤ 100 messages, ≤ 256 KB per call) and each
 * call's rows are deleted only after that call resolved. If a send fails the
 * rows stay and the error is returned: the caller (the shard's alarm) re-arms
 * with backoff. A crash between a send and its delete re-sends those facts
 * later; every consumer dedupes by fact id, so that changes nothing. A fact
 * whose message would exceed the queue's message limit goes through R2.
 */
import type { LedgerStorage } from "../ledger/LedgerStorage.js"
import * as SendBatches from "../producing/SendBatches.js"
import * as FactMessage from "./FactMessage.js"

/** Queue messages are limited to 128 KB; stay well below it. */
export const maxInlineMessageBytes = 100 * 1024
/** Rows relayed per alarm run; the alarm re-arms at once while rows remain. */
export const rowsPerRun = 500

export interface RelayTargets {
  readonly queue: (destination: string) => Queue | undefined
  /** Stores a large fact payload in R2 and returns its `r2://` reference. */
  readonly offload: (tenantId: string, name: string, payload: unknown) => Promise<string>
}

export interface RelayResult {
  readonly sent: number
  readonly remaining: number
}

export const relay = async (ledger: LedgerStorage, targets: RelayTargets, limit: number = rowsPerRun): Promise<RelayResult> => {
  const entries = ledger.pendingOutbox(limit)
  const byDestination = new Map<string, Array<(typeof entries)[number]>>()
  for (const entry of entries) byDestination.set(entry.destination, [...(byDestination.get(entry.destination) ?? []), entry])
  let sent = 0
  for (const [destination, rows] of byDestination) {
    const queue = targets.queue(destination)
    if (!queue) throw new Error(`no queue binding for outbox destination ${destination}`)
    const messages = await Promise.all(
      rows.map(async (row) => {
        const envelope = FactMessage.make(row.fact)
        if (SendBatches.sizeOf(envelope) <= maxInlineMessageBytes) return { id: row.id, body: envelope }
        const { payload, ...rest } = envelope
        const payload_ref = await targets.offload(row.fact.tenant_id, `facts/${row.fact.fact_id}`, payload)
        return { id: row.id, body: { ...rest, payload_ref } }
      })
    )
    for (const chunk of SendBatches.split(messages, (m) => m.body)) {
      await queue.sendBatch(chunk.map((m) => ({ body: m.body, contentType: "json" as const })))
      ledger.deleteOutbox(chunk.map((m) => m.id))
      sent += chunk.length
    }
  }
  return { sent, remaining: ledger.outboxSize() }
}
