/**
 * The LedgerShard Durable Object: one per shard key (`tenant_id/#n`, see
 * core's Shards), SQLite storage, many streams. Appends and reads go to
 * core's LedgerStorage (where the transaction lives).
 *
 * An append writes facts only: the consumer that appended relays them
 * itself, once per batch. When that relay fails, the consumer hands the facts
 * over (`handover`): the shard writes outbox rows and arms its alarm, which
 * drains the outbox, re-arming itself with backoff (1 s doubling to 5 min)
 * while sends fail; the shard is then marked pending in D1 (`ledger_shards`)
 * so the scheduled sweep can re-arm it if an alarm is ever lost. On the happy
 * path there is no outbox row, no alarm and no delete. Nothing here creates
 * storage on a read.
 */
import { DurableObject } from "cloudflare:workers"
import { Effect } from "effect"
import { type LedgerProtocol, LedgerStorage, OutboxRelay, PayloadStore } from "@factline/core"
import type { Fact } from "@factline/schemas"
import type { PlatformEnv } from "./Env.js"
import { queueBinding } from "./Services.js"

export const relayBackoffMs = (failures: number) => Math.min(1_000 * 2 ** Math.max(0, failures - 1), 5 * 60_000)
/** How soon the alarm first tries to relay facts handed over after a failed send. */
export const handoverDelayMs = 1_000

export class LedgerShard extends DurableObject<PlatformEnv> implements LedgerProtocol.LedgerShardRpc {
  private readonly ledger: LedgerStorage.LedgerStorage

  constructor(ctx: DurableObjectState, env: PlatformEnv) {
    super(ctx, env)
    this.ledger = LedgerStorage.make(ctx.storage)
  }

  async append(groups: ReadonlyArray<LedgerProtocol.AppendGroup>): Promise<ReadonlyArray<LedgerProtocol.AppendResult>> {
    const results = groups.map((group) => this.ledger.append(group))
    const first = groups[0]
    if (first && this.ledger.getMeta("tenant_id") === undefined && results.some((r) => r.status === "appended")) {
      this.ledger.setMeta("tenant_id", first.tenant_id)
    }
    return results
  }

  async handover(entries: ReadonlyArray<LedgerProtocol.Handover>, shardKey: string): Promise<number> {
    const written = this.ledger.handover(entries)
    if (written > 0 && this.ledger.getMeta("shard_key") === undefined) this.ledger.setMeta("shard_key", shardKey)
    if (this.ledger.outboxSize() > 0) await this.arm(handoverDelayMs)
    return written
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

  /** Rows handed over and not yet relayed downstream. */
  async outboxSize(): Promise<number> {
    return this.ledger.outboxSize()
  }

  /** Used by the scheduled sweep: re-arms the relay if rows are waiting. */
  async relayNow(shardKey?: string): Promise<number> {
    if (shardKey !== undefined && this.ledger.exists() && this.ledger.getMeta("shard_key") === undefined) this.ledger.setMeta("shard_key", shardKey)
    const pending = this.ledger.outboxSize()
    if (pending > 0) await this.arm(0)
    return pending
  }

  override async alarm(): Promise<void> {
    await this.drain()
  }

  /** Relays the outbox; on success removes the alarm, on failure re-arms it with backoff. */
  private async drain(): Promise<void> {
    try {
      const result = await OutboxRelay.relay(this.ledger, this.targets())
      if (this.ledger.getMeta("relay_failures") !== undefined) {
        await this.register(null)
        this.ledger.setMeta("relay_failures", undefined)
      }
      // Checked right before deleting, with no await in between: a handover that wrote rows since is seen here.
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

  /** Marks this shard pending (or no longer) in `ledger_shards`, where the sweep finds it. */
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
      queue: queueBinding(env),
      offload: (tenantId, name, payload) => Effect.runPromise(payloads.put(tenantId, name, payload))
    }
  }
}
