/**
 * A LedgerShard's alarm (LedgerShard.ts): it fires the timers due (core's `LedgerStorage.fireDue`, not while a
 * reshard holds the shard), then relays the outbox through the queues' door, re-arming itself with backoff while
 * sends or firings fail and marking the shard pending in `ledger_shards` (where the sweep finds it) until a relay
 * succeeds; otherwise it is set to the next timer, or removed. It keeps the firing failures of this instance; the
 * shard hands it its ledger, storage and runtime, and arms it after appends, handovers and a reshard's steps.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { LedgerTopology, type LedgerStorage, Metrics, OutboxRelay, RetryPolicy } from "@factline/core/runtime"
import type { ShardRuntime } from "./Services.js"

export const relayBackoffMs = (failures: number) => Math.min(1_000 * 2 ** Math.max(0, failures - 1), 5 * 60_000)
/** How soon the alarm first tries to relay facts handed over after a failed send. */
export const handoverDelayMs = 1_000

/** What the alarm reaches of its shard (the ledger is replaced when the shard deletes everything). */
export interface AlarmHost {
  readonly ledger: () => LedgerStorage.LedgerStorage
  readonly storage: DurableObjectStorage
  readonly runtime: () => ShardRuntime
  /** While a reshard holds or has switched the shard: its timers wait. */
  readonly firingPaused: () => boolean
}

export class ShardAlarm {
  /** Firing failures in a row (this instance): while they last, due timers are retried with the relay's backoff, not at once. */
  private timerFailures = 0
  private timerRetryAt = 0

  constructor(private readonly host: AlarmHost) {}

  /** The alarm's run: due timers fired, then the outbox drained. */
  async run(): Promise<void> {
    await this.fireTimers()
    await this.drain()
  }

  /** Appends the facts of the timers due now, with their outbox rows: the drain that follows relays them. */
  private async fireTimers(): Promise<void> {
    const now = await this.host.runtime().runPromise(Clock.currentTimeMillis)
    // A reshard holds this shard: its moving streams' timers fire in their new shard; the others after the drop.
    if (this.host.firingPaused()) {
      this.timerRetryAt = now + handoverDelayMs
      return
    }
    try {
      // To every fact queue: whether anything listens to the fact's type is the code's of the day it fires, not the day it was set.
      await this.host.ledger().fireDue(now, RetryPolicy.factQueues)
      this.timerFailures = 0
      this.timerRetryAt = 0
    } catch (error) {
      // The timers stay pending: the alarm comes back for them, with backoff (nextTimerAlarm).
      this.timerFailures++
      this.timerRetryAt = now + relayBackoffMs(this.timerFailures)
      await this.host.runtime().runPromise(Effect.logError(`firing timers failed (${this.timerFailures} in a row): ${error instanceof Error ? error.message : String(error)}`))
    }
  }

  /** When the alarm should come back for the timers: the next one's time, not before a failed firing's backoff. */
  private nextTimerAlarm(): number | undefined {
    const next = this.host.ledger().nextTimerAt()
    return next === undefined ? undefined : Math.max(next, this.timerRetryAt)
  }

  /** Moves the alarm to the next pending timer's time if that is earlier. */
  async armNextTimer() {
    const next = this.nextTimerAlarm()
    if (next === undefined) return
    const current = await this.host.storage.getAlarm()
    if (current === null || current > next) await this.host.storage.setAlarm(next)
  }

  /**
   * Relays the outbox through the queues' door (to this shard's tenant's group queues); on success sets the alarm
   * to the next timer (or removes it), on failure re-arms it with backoff. The messages it sent (those of a failed
   * run too), counted by the door into the shard runtime's tally, are written to `messages_sent_total` after.
   */
  private async drain(): Promise<void> {
    try {
      // A shard holds one tenant: its outbox's logical destinations go to that tenant's group queues.
      const result = await this.host.runtime().runPromise(OutboxRelay.relay(this.host.ledger(), this.host.ledger().getMeta("tenant_id") ?? ""))
      if (this.host.ledger().getMeta("relay_failures") !== undefined) {
        await this.register(null)
        this.host.ledger().setMeta("relay_failures", undefined)
      }
      // Checked right before deleting, with no await in between: a handover that wrote rows since is seen here.
      if (this.host.ledger().outboxSize() > 0 || result.remaining > 0) await this.arm(0)
      else {
        const next = this.nextTimerAlarm()
        if (next === undefined) await this.host.storage.deleteAlarm()
        else await this.host.storage.setAlarm(next)
      }
    } catch (error) {
      const failures = Number(this.host.ledger().getMeta("relay_failures") ?? "0") + 1
      this.host.ledger().setMeta("relay_failures", String(failures))
      await this.host.runtime().runPromise(Effect.logError(`outbox relay failed (${failures} in a row): ${error instanceof Error ? error.message : String(error)}`))
      await this.arm(relayBackoffMs(failures))
      await this.armNextTimer()
      await this.register("now").catch(() => undefined)
    } finally {
      // Logged, never thrown, when the rollup cannot take it: the messages were sent.
      await this.host.runtime().runPromise(Metrics.recordTallied())
    }
  }

  async arm(delayMs: number) {
    const at = (await this.host.runtime().runPromise(Clock.currentTimeMillis)) + delayMs
    const current = await this.host.storage.getAlarm()
    if (current === null || current > at) await this.host.storage.setAlarm(at)
  }

  /** Marks this shard pending since now (or no longer pending) in `ledger_shards`, where the sweep finds it. */
  private async register(pending: "now" | null) {
    const shardKey = this.host.ledger().getMeta("shard_key")
    const tenantId = this.host.ledger().getMeta("tenant_id")
    if (shardKey === undefined || tenantId === undefined) return
    await this.host.runtime().runPromise(Effect.gen(function*() {
      const since = pending === null ? null : new Date(yield* Clock.currentTimeMillis).toISOString()
      yield* LedgerTopology.markRelay(shardKey, tenantId, since)
    }))
  }
}
