/**
 * The LedgerShard Durable Object: one per shard key (default `tenant_id/subject`),
 * SQLite storage. A thin RPC shell around core's LedgerStorage, where the
 * append/read logic and its transaction live.
 */
import { DurableObject } from "cloudflare:workers"
import { LedgerStorage, type LedgerProtocol } from "@factline/core"

export class LedgerShard extends DurableObject implements LedgerProtocol.LedgerShardRpc {
  private readonly ledger: LedgerStorage.LedgerStorage

  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env as never)
    this.ledger = LedgerStorage.make(ctx.storage)
  }

  async append(groups: ReadonlyArray<LedgerProtocol.AppendGroup>): Promise<ReadonlyArray<LedgerProtocol.AppendResult>> {
    return groups.map((group) => this.ledger.append(group))
  }

  async readStreams(keys: ReadonlyArray<LedgerProtocol.StreamKey>): Promise<ReadonlyArray<LedgerProtocol.StreamState>> {
    return keys.map((key) => this.ledger.readStream(key))
  }

  async read(key: LedgerProtocol.StreamKey, options?: LedgerProtocol.ReadOptions): Promise<LedgerProtocol.StreamState> {
    return this.ledger.readStream(key, options)
  }

  /** Rows written with facts and not yet relayed downstream (the relay is a later step). */
  async outboxSize(): Promise<number> {
    return this.ledger.outboxSize()
  }
}
