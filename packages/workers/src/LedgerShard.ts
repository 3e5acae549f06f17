/**
 * The LedgerShard Durable Object: one per shard key (default `tenant_id/subject`),
 * SQLite storage. Appends and reads go to core's LedgerStorage (where the
 * transaction lives); the outbox is relayed to the downstream queues.
 *
 * Relay: an append that wrote facts first arms a safety alarm, then relays its
 * outbox inline before answering, so the caller only acks its message once
 * the facts are on their way, and no alarm has to run on the happy path (the
 * alarm is removed once the outbox is empty). If the inline relay fails — or
 * the object dies mid-way — the alarm drains the outbox, re-arming itself with
 * backoff (1 s doubling to 5 min) while sends fail, and the shard is marked
 * pending in D1 (`ledger_shards`) so the scheduled sweep can re-arm it if an
 * alarm is ever lost. (Shards are registered in `ledger_shards` by the
 * consumers, in their inbox round trip, before they append.)
 */
import { DurableObject } from "cloudflare:workers"
import { Effect } from "effect"
import { LedgerProtocol, LedgerStorage, OutboxRelay, PayloadStore, RetryPolicy } from "@factline/core"
import type { Fact } from "@factline/schemas"
import type { PlatformEnv } from "./Env.js"

export const relayBackoffMs = (failures: number) => Math.min(1_000 * 2 ** Math.max(0, failures - 1), 5 * 60_000)
/** When the safety alarm fires if the inline relay did not empty the outbox. */
export const safetyAlarmMs = 30_000

export class LedgerShard extends DurableObject<PlatformEnv> implements LedgerProtocol.LedgerShardRpc {
  private readonly ledger: LedgerStorage.LedgerStorage

  constructor(ctx: DurableObjectState, env: PlatformEnv) {
    super(ctx, env)
    this.ledger = LedgerStorage.make(ctx.storage)
  }

  async append(groups: ReadonlyArray<LedgerProtocol.AppendGroup>): Promise<ReadonlyArray<LedgerProtocol.AppendResult>> {
    const results = groups.map((group) => this.ledger.append(group))
    const first = groups[0]
    if (first && results.some((r) => r.status === "appended")) {
      if (this.ledger.getMeta("shard_key") === undefined) {
        this.ledger.setMeta("shard_key", LedgerProtocol.shardKey(first))
        this.ledger.setMeta("tenant_id", first.tenant_id)
      }
      await this.arm(safetyAlarmMs)
      if (this.ledger.getMeta("relay_failures") === undefined) await this.drain()
    }
    return results
  }

  async readStreams(keys: ReadonlyArray<LedgerProtocol.StreamKey>): Promise<ReadonlyArray<LedgerProtocol.StreamState>> {
    return keys.map((key) => this.ledger.readStream(key))
  }

  async read(key: LedgerProtocol.StreamKey, options?: LedgerProtocol.ReadOptions): Promise<LedgerProtocol.StreamState> {
    return this.ledger.readStream(key, options)
  }

  /** Every fact of this shard, in (stream, sequence) order, for rebuilds. */
  async readShard(after: { readonly stream: string; readonly sequence: number } | undefined, limit: number): Promise<ReadonlyArray<Fact>> {
    return this.ledger.readShard(after, Math.min(Math.max(1, limit), 5_000))
  }

  /** Rows written with facts and not yet relayed downstream. */
  async outboxSize(): Promise<number> {
    return this.ledger.outboxSize()
  }

  /** Used by the scheduled sweep: re-arms the relay if rows are waiting. */
  async relayNow(): Promise<number> {
    const pending = this.ledger.outboxSize()
    if (pending > 0) await this.arm(0)
    return pending
  }

  override async alarm(): Promise<void> {
    await this.drain()
  }

  /** Relays the outbox; on success removes the safety alarm, on failure re-arms it with backoff. */
  private async drain(): Promise<void> {
    try {
      const result = await OutboxRelay.relay(this.ledger, this.targets())
      if (this.ledger.getMeta("relay_failures") !== undefined) {
        await this.register(null)
        this.ledger.setMeta("relay_failures", undefined)
      }
      // Checked right before deleting, with no await in between: an append that wrote rows since is seen here.
      if (this.ledger.outboxSize() > 0 || result.remaining > 0) await this.arm(0)
      else await this.ctx.storage.deleteAlarm()
    } catch (error) {
      const failures = Number(this.ledger.getMeta("relay_failures") ?? "0") + 1
      this.ledger.setMeta("relay_failures", String(failures))
      console.error(`outbox relay failed (${failures} in a row): ${error instanceof Error ? error.message : String(error)}`)
      await this.arm(relayBackoffMs(failures))
      await this.register(new Date().toISOString()).catch(() => undefined)
    }
  }

  private async arm(delayMs: number) {
    const at = Date.now() + delayMs
    const current = await this.ctx.storage.getAlarm()
    if (current === null || current > at) await this.ctx.storage.setAlarm(at)
  }

  private async register(pendingSince: string | null) {
    const shardKey = this.ledger.getMeta("shard_key")
    const tenantId = this.ledger.getMeta("tenant_id")
    if (shardKey === undefined || tenantId === undefined) return
    const now = new Date().toISOString()
    await this.env.DB.prepare(
      `INSERT INTO ledger_shards (shard_key, tenant_id, registered_at, relay_pending_since, last_relayed_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (shard_key) DO UPDATE SET
         relay_pending_since = CASE WHEN excluded.relay_pending_since IS NULL THEN NULL ELSE COALESCE(ledger_shards.relay_pending_since, excluded.relay_pending_since) END,
         last_relayed_at = COALESCE(excluded.last_relayed_at, ledger_shards.last_relayed_at)`
    ).bind(shardKey, tenantId, now, pendingSince, pendingSince === null ? now : null).run()
  }

  private targets(): OutboxRelay.RelayTargets {
    const env = this.env
    const payloads = PayloadStore.make(env.PAYLOADS, env.FACTLINE_PAYLOAD_BUCKET ?? PayloadStore.defaultBucketName)
    return {
      queue: (destination) => {
        const policy = RetryPolicy.forQueue(destination)
        return policy ? (env[policy.binding] as Queue | undefined) : undefined
      },
      offload: (tenantId, name, payload) => Effect.runPromise(payloads.put(tenantId, name, payload))
    }
  }
}
