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
 *
 * Timers share the alarm: it is set to the earliest of a pending outbox and
 * the next due timer. An append that schedules a timer arms it; the alarm
 * fires what is due (core's `LedgerStorage.fireDue`: the timer's fact and its
 * outbox rows in one transaction, at most once per timer), relays the outbox
 * — the fired facts with it — and sets itself to the next timer, if any
 * (ShardAlarm.ts does the alarm's work).
 */
import { DurableObject } from "cloudflare:workers"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { Bindings, ColdHistory, ColdProtocol, KeyStorage, LedgerProtocol, LedgerStorage, ShardReshard } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import type { PlatformEnv } from "./Env.js"
import { shardRuntime, type ShardRuntime } from "./Services.js"
import { handoverDelayMs, ShardAlarm } from "./ShardAlarm.js"

export { handoverDelayMs, relayBackoffMs } from "./ShardAlarm.js"

export class LedgerShard extends DurableObject<PlatformEnv> implements LedgerProtocol.LedgerShardRpc {
  private ledger: LedgerStorage.LedgerStorage
  /** Whether this object has seen its `tenant_id` meta recorded. */
  private tenantRecorded = false
  /** Timers and the outbox relay (ShardAlarm). */
  private alarms: ShardAlarm
  /** This shard's place in its tenant's reshards: which streams it still answers (core's ShardReshard). */
  private resharding: ShardReshard.ShardReshard

  /** The shard's facts with their cold history in R2 (core's ColdHistory): every read and append goes through it. */
  private coldHistory?: ColdHistory.ColdHistory
  private get history(): ColdHistory.ColdHistory {
    return (this.coldHistory ??= ColdHistory.make(this.ledger, this.runtime.runSync(Effect.service(Bindings.PayloadBucket))))
  }

  constructor(ctx: DurableObjectState, env: PlatformEnv) {
    super(ctx, env)
    this.ledger = LedgerStorage.make(ctx.storage)
    this.resharding = ShardReshard.make(ctx.storage, this.ledger)
    this.alarms = this.newAlarm()
  }

  private newAlarm() {
    return new ShardAlarm({ ledger: () => this.ledger, storage: this.ctx.storage, runtime: () => this.runtime, firingPaused: () => this.resharding.firingPaused() })
  }

  /** The key store's calls: only the object named `KeyStorage.objectName(tenant)` gets them (core's personal/KeyStorage.ts). */
  private keyStore?: KeyStorage.KeyStoreRpc
  private get keys(): KeyStorage.KeyStoreRpc {
    return (this.keyStore ??= KeyStorage.make(this.ctx.storage))
  }

  async currentKeys(requests: ReadonlyArray<KeyStorage.CurrentRequest>, options: { readonly refuseErased: boolean; readonly now: string }) {
    return this.keys.currentKeys(requests, options)
  }

  async readKeys(refs: ReadonlyArray<KeyStorage.KeyRef>) {
    return this.keys.readKeys(refs)
  }

  async eraseKeys(subject: string, now: string) {
    return this.keys.eraseKeys(subject, now)
  }

  async keyState(subject: string) {
    return this.keys.keyState(subject)
  }

  /** The runtime of this object's bindings (one per bindings object, built on first use). */
  private get runtime(): ShardRuntime {
    return shardRuntime(this.env)
  }

  /** Appends the groups whose streams this shard answers; a stream a reshard holds or has moved is refused (ShardReshard). */
  async append(groups: ReadonlyArray<LedgerProtocol.AppendGroup>): Promise<ReadonlyArray<LedgerProtocol.AppendAnswer>> {
    const refused = this.resharding.refusals(groups)
    if (refused.every((r) => r === undefined)) return this.appendAnswered(groups)
    const answers = await this.appendAnswered(groups.filter((_, i) => refused[i] === undefined))
    let next = 0
    return refused.map((r) => r ?? answers[next++]!)
  }

  private async appendAnswered(groups: ReadonlyArray<LedgerProtocol.AppendGroup>): Promise<ReadonlyArray<LedgerProtocol.AppendAnswer>> {
    const results = await this.history.append(groups)
    const first = groups[0]
    // The shard's tenant, recorded by its first append (never changed or removed): read once per object.
    if (!this.tenantRecorded && first && results.some((r) => r.status === "appended")) {
      if (this.ledger.getMeta("tenant_id") === undefined) this.ledger.setMeta("tenant_id", first.tenant_id)
      this.tenantRecorded = true
    }
    // Only an append that scheduled or cancelled a timer touches the alarm.
    const timed = groups.some((group, i) => results[i]!.status === "appended" && group.facts.some((f) => f.type === "timer_scheduled" || f.type === "timer_cancelled"))
    if (timed) await this.alarms.armNextTimer()
    return results.map(LedgerProtocol.toAnswer)
  }

  async handover(entries: ReadonlyArray<LedgerProtocol.Handover>, shardKey: string): Promise<LedgerProtocol.HandoverAnswer> {
    // A cold fact has no hot row for an outbox row to point at: refused, so the caller's message is retried and relays it itself.
    const cold = this.history.coldIds(entries.map((entry) => entry.fact_id))
    if (cold.length > 0) throw new Error(`${cold.length} fact(s) handed over are in cold history (older than the hot window); the caller relays them itself`)
    const answer = this.resharding.handover(entries)
    const written = typeof answer === "number" ? answer : answer.written
    if (written > 0 && this.ledger.getMeta("shard_key") === undefined) this.ledger.setMeta("shard_key", shardKey)
    if (this.ledger.outboxSize() > 0) await this.alarms.arm(handoverDelayMs)
    return answer
  }

  async readStreams(keys: ReadonlyArray<LedgerProtocol.StreamRead>): Promise<ReadonlyArray<LedgerProtocol.StreamState>> {
    const states: Array<LedgerProtocol.StreamState> = []
    for (const key of keys) states.push(await this.readOne(key))
    return states
  }

  async read(key: LedgerProtocol.StreamKey, options?: LedgerProtocol.ReadOptions): Promise<LedgerProtocol.StreamState> {
    return this.readOne(key, options)
  }

  /** A stream a reshard moved away is answered `moved` (nothing else): the ledger client asks its new shard. */
  private async readOne(key: LedgerProtocol.StreamRead, options?: LedgerProtocol.ReadOptions): Promise<LedgerProtocol.StreamState> {
    const refused = this.resharding.refusal(key.stream)
    if (refused?.status === "moved") return { tenant_id: key.tenant_id, stream: key.stream, version: 0, facts: [], moved: refused.shard_count }
    return this.history.readStream(key, options)
  }

  // A reshard's calls (core's placement/Reshard.ts drives them, ShardReshard answers them).
  async reshardHold(index: number, from: number, to: number): Promise<void> {
    this.resharding.hold(index, from, to)
  }

  async reshardExtras(): Promise<LedgerProtocol.ReshardExtras> {
    return this.resharding.extras()
  }

  async reshardSwitch(): Promise<LedgerProtocol.ReshardExtras["outbox"]> {
    return this.resharding.switch()
  }

  async reshardDrop(streams: number): Promise<{ readonly dropped: number; readonly remaining: number }> {
    const answer = await this.resharding.drop(streams, (names) => this.history.coldIdsOf(names))
    // Timers waited while this shard was held and switched: the unmoved ones fire again.
    if (answer.remaining === 0) await this.alarms.armNextTimer()
    return answer
  }

  async reshardRelease(): Promise<void> {
    this.resharding.release()
    await this.alarms.armNextTimer()
  }

  async reshardImport(input: LedgerProtocol.ReshardImport): Promise<number> {
    const written = this.resharding.import(input)
    if (this.ledger.outboxSize() > 0) await this.alarms.arm(handoverDelayMs)
    if (!this.resharding.firingPaused()) await this.alarms.armNextTimer()
    return written
  }

  /** Every fact of this shard, in (stream, sequence) order, for rebuilds. */
  async readShard(after: { readonly stream: string; readonly sequence: number } | undefined, limit: number): Promise<ReadonlyArray<Fact>> {
    return this.history.readShard(after, Math.min(Math.max(1, limit), 5_000))
  }

  /** The facts appended since `since` among the next `scan` (at most 5,000) after `after`, and where to go on: recovery's walk. */
  async readShardSince(after: LedgerProtocol.ShardCursor | undefined, since: string, scan: number) {
    return this.history.readShardSince(after, since, Math.min(Math.max(1, scan), 5_000))
  }

  /** The fact with this id, if this shard holds it (its unique index; reading creates no storage). */
  async findFact(factId: string): Promise<Fact | null> {
    return this.history.findFact(factId)
  }

  /** One chunk of this shard's facts created before `cutoff` to a cold segment in R2 (the scheduled sweep's ColdTiering). */
  async tier(shardKey: string, cutoff: string, limit: number): Promise<ColdProtocol.Tiered> {
    // A shard in a reshard tiers nothing until it settles: its drop reads the moved streams' cold ids and forgets them.
    if (this.resharding.firingPaused()) return { tiered: 0, wrapped: true }
    const now = new Date(await this.runtime.runPromise(Clock.currentTimeMillis)).toISOString()
    return this.history.tier(shardKey, cutoff, limit, now)
  }

  /** The cold manifest's totals (the ledger's health read). */
  async coldStats(): Promise<ColdProtocol.ColdStats> {
    return this.history.stats()
  }

  /** Rows handed over and not yet relayed downstream. */
  async outboxSize(): Promise<number> {
    return this.ledger.outboxSize()
  }

  /** Used by the scheduled sweep: re-arms the relay if rows are waiting. */
  async relayNow(shardKey?: string): Promise<number> {
    if (shardKey !== undefined && this.ledger.exists() && this.ledger.getMeta("shard_key") === undefined) this.ledger.setMeta("shard_key", shardKey)
    const pending = this.ledger.outboxSize()
    if (pending > 0) await this.alarms.arm(0)
    await this.alarms.armNextTimer()
    return pending
  }

  /**
   * Deletes everything this object stores — every table, its meta, its alarm — for a departed tenant's deletion
   * (core's placement/Deletion.ts); the object answers as a new, empty one afterwards.
   */
  async deleteAll(): Promise<void> {
    await this.ctx.storage.deleteAlarm()
    await this.ctx.storage.deleteAll()
    this.ledger = LedgerStorage.make(this.ctx.storage)
    this.resharding = ShardReshard.make(this.ctx.storage, this.ledger)
    this.coldHistory = undefined
    this.tenantRecorded = false
    this.alarms = this.newAlarm()
  }

  override async alarm(): Promise<void> {
    await this.alarms.run()
  }
}
