/**
 * The outbox relay: drains a shard's outbox to the downstream queues — the
 * fallback for facts a consumer could not send itself (see FactRelay).
 *
 * Rows are packed several facts to a message (FactMessage.pack) and sent with
 * `sendBatch` (≤ 100 messages, ≤ 256 KB per call); each call's rows are
 * deleted, in one statement, only after that call resolved. If a send fails
 * the rows stay and the error is thrown: the caller (the shard's alarm)
 * re-arms with backoff. A crash between a send and its delete re-sends those
 * facts later; every consumer dedupes by fact id, so that changes nothing.
 */
import type { Fact } from "@factline/schemas"
import type { LedgerStorage } from "../ledger/LedgerStorage.js"
import * as SendBatches from "../producing/SendBatches.js"
import * as FactMessage from "./FactMessage.js"

/** Rows relayed per alarm run; the alarm re-arms at once while rows remain. */
export const rowsPerRun = 500

export interface RelayTargets {
  readonly queue: (destination: string) => Queue | undefined
  /** Stores a large fact payload in R2 and returns its `r2://` reference. */
  readonly offload: (tenantId: string, name: string, payload: unknown) => Promise<string>
  /** Told of each send that resolved (messages to a destination), for `messages_sent_total` (Metrics.recordSent). */
  readonly sent?: (destination: string, messages: number) => void
}

export interface RelayResult {
  readonly sent: number
  readonly remaining: number
}

export const relay = async (ledger: LedgerStorage, targets: RelayTargets, limit: number = rowsPerRun): Promise<RelayResult> => {
  const entries = ledger.pendingOutbox(limit)
  const byDestination = new Map<string, Array<(typeof entries)[number]>>()
  for (const entry of entries) {
    const rows = byDestination.get(entry.destination)
    if (rows) rows.push(entry)
    else byDestination.set(entry.destination, [entry])
  }
  let sent = 0
  for (const [destination, rows] of byDestination) {
    const queue = targets.queue(destination)
    if (!queue) throw new Error(`no queue binding for outbox destination ${destination}`)
    const rowIds = new Map<Fact, number>(rows.map((row) => [row.fact, row.id]))
    const messages = await FactMessage.pack(rows.map((row) => row.fact), targets.offload)
    for (const chunk of SendBatches.split(messages, (m) => m.body, (m) => m.bytes)) {
      await queue.sendBatch(chunk.map((m) => ({ body: m.body, contentType: "json" as const })))
      targets.sent?.(destination, chunk.length)
      const ids = chunk.flatMap((m) => m.facts.map((f) => rowIds.get(f)!))
      ledger.deleteOutbox(ids)
      sent += ids.length
    }
  }
  return { sent, remaining: ledger.outboxSize() }
}
