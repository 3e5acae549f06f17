/**
 * The scheduled maintenance, as Effects over the platform's services: what
 * the Worker's cron trigger runs, in this order — move dead letters the DLQ
 * consumer spilled to R2 during a D1 outage into `dead_messages`, re-arm shards whose relay
 * has been pending too long (a lost alarm), evaluate the operator alerts
 * (`Alerts`: health changes, new dead letters), forget old inbox rows, first-attempt
 * records, runs (by age and beyond `Runs.maxRuns`) and accepted idempotency keys, drop resolved dead letters and old metrics
 * minutes, fail batch jobs whose chunk message was lost, start the catch-up
 * of projections new to the deployment or re-versioned and report those whose
 * table is missing (`CatchUp`), move the `facts`
 * copy's days past its window to the R2 archive (`Archive`), move the ledger's facts past each tenant's hot window
 * to cold segments in R2 (`ColdTiering`). Each job is bounded
 * per run (a backlog is worked off over the next runs) and reads the time
 * from `Clock`.
 *
 * It does not schedule itself (the Worker's `scheduled` handler does) and
 * owns no table: each job asks the module owning its table.
 */
import * as WorkflowInstances from "../workflows/Instances.js"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Archive from "../archive/Archive.js"
import * as ColdTiering from "./ColdTiering.js"
import * as Placement from "../placement/Placement.js"
import * as BatchJobs from "../batch/BatchJobs.js"
import * as CatchUp from "./CatchUp.js"
import * as DeadLetterConsumer from "../consuming/DeadLetterConsumer.js"
import * as FirstAttempts from "../consuming/FirstAttempts.js"
import * as Inbox from "../consuming/Inbox.js"
import * as Runs from "../consuming/Runs.js"
import { Ledger } from "../ledger/Ledger.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import { AcceptedKeys } from "../producing/AcceptedKeys.js"
import * as KeyRetention from "../producing/KeyRetention.js"
import * as Alerts from "./Alerts.js"
import * as Metrics from "./Metrics.js"

/** Inbox rows (batch queue) older than this are pruned (docs/operating.md "Retention": 30 days). */
export const inboxRetentionDays = 30
/** Resolved dead letters (replayed, skipped, escalated) are kept this long; open ones never expire. */
export const deadLetterRetentionDays = 30
/** The per-minute metrics rollup is kept this long. */
export const metricsRetentionDays = 14
/** Rows each retention pass deletes per table and run, so one cron run stays short. */
export const retentionChunk = 5_000
/**
 * Accepted idempotency keys (`accepted_keys`) are forgotten after as long as the inbox keeps its rows:
 * within it, a key stays bound to its payload (a retry with another payload is a conflict).
 */
export const acceptedKeysRetentionDays = KeyRetention.defaultDays
/**
 * Keys walked per scheduled run and database (by primary key, from where the last run stopped; the expired
 * ones among them deleted): a pass over a table of S keys takes S / 50,000 runs — 10 M keys (10 M events a
 * month on one database) in 200 runs, under 17 hours at one run every 5 minutes; 50 M (a full 10 GB
 * database) in 3.5 days. A key lives its 30 days plus at most one pass. Each run reads about twice the
 * window in rows (finding its end, then deleting in it): ~0.9 B rows a month, inside D1's 25 B included.
 */
export const acceptedKeysWalkedPerRun = 50_000
/** A shard whose relay has been failing for this long is re-armed by the sweep. */
export const staleRelayMinutes = 5
export const shardsPerSweep = 200

const dayMs = 24 * 3600 * 1000
const before = (ms: number) => Effect.map(Clock.currentTimeMillis, (now) => new Date(now - ms).toISOString())

/** Re-arms the relay of every shard whose outbox has been pending too long. Returns how many were re-armed. */
export const sweepStaleRelays = Effect.fn("Maintenance.sweepStaleRelays")(function*() {
  const ledger = yield* Ledger
  const shards = yield* LedgerTopology.pendingSince(yield* before(staleRelayMinutes * 60_000), shardsPerSweep)
  yield* Effect.forEach(shards, (shardKey) => ledger.relayNow(shardKey), { concurrency: "unbounded", discard: true })
  return shards.length
})

/** Forgets succeeded inbox rows past their retention, oldest first, at most `retentionChunk`; returns how many. */
export const pruneInbox = Effect.fn("Maintenance.pruneInbox")(function*() {
  return yield* Inbox.prune(yield* before(inboxRetentionDays * dayMs), retentionChunk)
})

/** Forgets first-attempt records past the longest a queue keeps a message, oldest first, at most `retentionChunk`; returns how many. */
export const pruneFirstAttempts = Effect.fn("Maintenance.pruneFirstAttempts")(function*() {
  return yield* FirstAttempts.prune(yield* before(FirstAttempts.retentionDays * dayMs), retentionChunk)
})

/** Forgets runs not updated for `Runs.retentionDays`, and the oldest beyond `Runs.maxRuns`, at most `retentionChunk` each; returns how many. */
export const pruneRuns = Effect.fn("Maintenance.pruneRuns")(function*() {
  return yield* Runs.prune(yield* before(Runs.retentionDays * dayMs), retentionChunk)
})

/**
 * Forgets accepted idempotency keys past their retention among the next `limit` keys of each database's
 * walk (AcceptedKeys.prune); returns how many.
 */
export const pruneAcceptedKeys = Effect.fn("Maintenance.pruneAcceptedKeys")(function*(limit: number = acceptedKeysWalkedPerRun, retention: KeyRetention.Retention = KeyRetention.standard) {
  const keys = yield* AcceptedKeys
  const millis = yield* Clock.currentTimeMillis
  const expired = KeyRetention.cutoffs(retention, millis)
  return yield* keys.prune(expired.before, limit, new Date(millis).toISOString(), expired.tenants)
})

/** Deletes at most `retentionChunk` rows per table: resolved dead letters, old rollup minutes. Returns what it deleted. */
export const pruneOperations = Effect.fn("Maintenance.pruneOperations")(function*() {
  return yield* Metrics.prune(yield* before(deadLetterRetentionDays * dayMs), yield* before(metricsRetentionDays * dayMs), retentionChunk)
})

/** Fails batch jobs without progress for `BatchJobs.staleAfterMs` (their chunk message is lost); returns how many. */
export const failStaleBatchJobs = Effect.fn("Maintenance.failStaleBatchJobs")(function*() {
  const now = yield* Clock.currentTimeMillis
  return yield* Placement.everywhere(BatchJobs.failStale(new Date(now - BatchJobs.staleAfterMs).toISOString(), new Date(now).toISOString())).pipe(
    Effect.map((counts) => counts.reduce((a, b) => a + b, 0)),
    Effect.catch((error) => Effect.as(Effect.logError(`stale batch jobs could not be failed: ${error.message}`), 0))
  )
})

/**
 * Moves at most `Archive.rowsPerRun` facts of days past the window from the D1 copy to the R2 archive; returns
 * how many. A refusing bucket or database is logged and retried by the next run (nothing left D1 unarchived).
 */
export const archiveFacts = Effect.fn("Maintenance.archiveFacts")(function*(limit: number = Archive.rowsPerRun) {
  return yield* Placement.everywhere(Archive.run(limit)).pipe(
    Effect.map((counts) => counts.reduce((a, b) => a + b, 0)),
    Effect.catch((error) => Effect.as(Effect.logError(`facts could not be archived, the next run retries: ${error.message}`), 0))
  )
})

/**
 * Moves the ledger's facts older than each tenant's hot window (`FACTLINE_LEDGER_HOT_DAYS`) from the next
 * `ColdTiering.shardsPerRun` shards to cold segments in R2; returns how many. A refusing shard or bucket is logged
 * and the next pass retries (each chunk leaves SQLite only once verified in R2).
 */
export const tierLedger = Effect.fn("Maintenance.tierLedger")(function*(hotDays: ColdTiering.HotDays) {
  return yield* ColdTiering.run(hotDays).pipe(
    Effect.catch((error) => Effect.as(Effect.logError(`the ledger could not be tiered, the next run retries: ${error.message}`), 0))
  )
})

/**
 * Moves at most `DeadLetterConsumer.recoveredPerRun` spilled dead letters (R2) into `dead_messages`; returns how
 * many. A refusing database or bucket is logged and the next run retries (the objects stay until stored).
 */
export const recoverSpilledDeadLetters = Effect.fn("Maintenance.recoverSpilledDeadLetters")(function*(limit: number = DeadLetterConsumer.recoveredPerRun) {
  return yield* DeadLetterConsumer.recoverSpilled(limit).pipe(
    Effect.catch((error) => Effect.as(Effect.logError(`spilled dead letters could not be recovered, the next run retries: ${error.message}`), 0))
  )
})

/** Evaluates the operator alerts; a store that does not answer is logged and the next run evaluates again. */
export const evaluateAlerts = Effect.fn("Maintenance.evaluateAlerts")(function*(options: Alerts.Options) {
  return yield* Alerts.evaluate(options).pipe(
    Effect.catch((error) => Effect.as(Effect.logError(`alerts could not be evaluated, the next run does: ${error.message}`), []))
  )
})

/**
 * Starts the catch-up of projections new to the deployment (or re-versioned), records those caught up, and
 * reports those whose table is missing (CatchUp.tick); a store that does not answer is logged and the next
 * run checks again. Returns what it did per projection.
 */
export const catchUpProjections = Effect.fn("Maintenance.catchUpProjections")(function*() {
  return yield* CatchUp.tick().pipe(
    Effect.catch((error) => Effect.as(Effect.logError(`projections could not be checked for catch-up, the next run does: ${error.message}`), []))
  )
})

/** Wakes workflow instances whose sleep or wait is overdue (Instances.wakeOverdue); a failure is logged, the next run retries. */
export const wakeOverdueWorkflows = Effect.fn("Maintenance.wakeOverdueWorkflows")(function*(overdueAfterMs?: number) {
  return yield* WorkflowInstances.wakeOverdue(overdueAfterMs).pipe(
    Effect.catch((error) => Effect.as(Effect.logError(`overdue workflow instances could not be woken, the next run tries again: ${error.message}`), 0))
  )
})

/** What a run needs of the settings (the Worker passes its own). */
export interface Options {
  /** `FACTLINE_ALERT_QUIET_MINUTES`, in milliseconds. */
  readonly alertQuietMs: number
  /** `FACTLINE_LEDGER_HOT_DAYS`: each tenant's hot window in days (undefined: never tiered). */
  readonly ledgerHotDays: ColdTiering.HotDays
  /** `FACTLINE_KEY_RETENTION_DAYS`: each tenant's accepted keys' life (default: 30 days for every tenant). */
  readonly keyRetention?: KeyRetention.Retention
  /** `FACTLINE_WORKFLOW_OVERDUE_SECONDS`, in milliseconds (default: Instances.overdueAfterSeconds). */
  readonly workflowOverdueMs?: number
}

/**
 * One scheduled run: every job in order; the spilled dead letters first (a failing job before them would hold
 * back what operators cannot see yet), the archive last.
 */
export const run = Effect.fn("Maintenance.run")(function*(options: Options) {
  yield* recoverSpilledDeadLetters()
  yield* sweepStaleRelays()
  yield* evaluateAlerts({ quietPeriodMs: options.alertQuietMs })
  yield* pruneInbox()
  yield* pruneFirstAttempts()
  yield* pruneRuns()
  yield* pruneAcceptedKeys(acceptedKeysWalkedPerRun, options.keyRetention)
  yield* pruneOperations()
  yield* failStaleBatchJobs()
  yield* catchUpProjections()
  yield* archiveFacts()
  yield* tierLedger(options.ledgerHotDays)
  yield* wakeOverdueWorkflows(options.workflowOverdueMs)
})
