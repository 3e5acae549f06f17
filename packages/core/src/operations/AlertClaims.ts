/**
 * What the claiming alert keys count, each record by exactly one alert: the dead letters no alert has counted
 * (`dead_messages.alert_id`, every read database) and the workflow instances whose failure no alert has
 * announced (`workflow_instances.alert_id` and `alerted_at`, the `updated_at` it announced — an instance that
 * fails again after a retry is announced again; platform database). Per key: a probe (is anything new?), the
 * claim under an alert's id, and the summary read back by that id (so an alert handed over again says the same).
 * Alerts decides, delivers and de-duplicates; this only reads and claims.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Placement from "../placement/Placement.js"
import * as Sql from "../platform/Sql.js"
import { type EventType, claimLimit, eventTypes, failedInstanceLimit, summarize, summarizeFailedInstances } from "./AlertCatalog.js"

const Found = Schema.Struct({ found: Schema.Number })
const Claims = Schema.Struct({ queue: Schema.String, reason: Schema.String, n: Schema.Number, first: Schema.String, last: Schema.String })
const FailedInstance = Schema.Struct({
  tenant_id: Schema.String, workflow: Schema.String, instance_id: Schema.String, subject: Schema.String, error: Schema.NullOr(Schema.String), updated_at: Schema.String
})
/** A failed instance no alert has announced (or not this failure of it: failed again since). */
const unannounced = "status = 'failed' AND (alerted_at IS NULL OR alerted_at < updated_at)"

type Requirements = Sql.PlatformDatabase | Placement.TenantPlacement
export interface Claiming {
  readonly eventType: EventType
  /** Whether anything is left to claim (one indexed probe). */
  readonly fresh: Effect.Effect<boolean, Sql.SqlFailure, Requirements>
  /** Claims what is left (up to the key's limit) under the alert's id. */
  readonly claim: (alert: string) => Effect.Effect<void, Sql.SqlFailure, Requirements>
  /** What the alert claimed, as it announces it. */
  readonly read: (alert: string) => Effect.Effect<Record<string, unknown> & { readonly count: number }, Sql.SqlFailure, Requirements>
}

const inEveryReadDatabase = <A>(f: (read: Sql.Sql) => Effect.Effect<A, Sql.SqlFailure>) => Placement.everywhere(Effect.flatMap(Effect.service(Sql.ReadDatabase), f))
const inPlatformDatabase = <A>(f: (sql: Sql.Sql) => Effect.Effect<A, Sql.SqlFailure>) => Effect.flatMap(Effect.service(Sql.PlatformDatabase), f)

export const deadLetters: Claiming = {
  eventType: eventTypes.deadLettersOpened,
  fresh: Effect.map(inEveryReadDatabase((read) => read.first(Found, Sql.statement("SELECT 1 AS found FROM dead_messages WHERE alert_id IS NULL LIMIT 1"))), (found) => found.some((r) => r !== undefined)),
  claim: (alert) => Effect.asVoid(inEveryReadDatabase((read) => read.run(Sql.statement(
    "UPDATE dead_messages SET alert_id = ? WHERE id IN (SELECT id FROM dead_messages WHERE alert_id IS NULL ORDER BY received_at LIMIT ?)", alert, claimLimit
  )))),
  read: (alert) => Effect.map(inEveryReadDatabase((read) => read.all(Claims, Sql.statement(
    "SELECT queue, reason, COUNT(*) AS n, MIN(received_at) AS first, MAX(received_at) AS last FROM dead_messages WHERE alert_id = ? GROUP BY queue, reason", alert
  ))), (perDatabase) => summarize(alert, perDatabase.flat()))
}

export const failedInstances: Claiming = {
  eventType: eventTypes.workflowFailed,
  fresh: Effect.map(inPlatformDatabase((sql) => sql.first(Found, Sql.statement(`SELECT 1 AS found FROM workflow_instances WHERE ${unannounced} LIMIT 1`))), (found) => found !== undefined),
  claim: (alert) => Effect.asVoid(inPlatformDatabase((sql) => sql.run(Sql.statement(
    `UPDATE workflow_instances SET alert_id = ?, alerted_at = updated_at WHERE rowid IN (SELECT rowid FROM workflow_instances WHERE ${unannounced} ORDER BY updated_at LIMIT ?)`,
    alert, failedInstanceLimit
  )))),
  read: (alert) => Effect.map(inPlatformDatabase((sql) => sql.all(FailedInstance, Sql.statement(
    "SELECT tenant_id, workflow, instance_id, subject, error, updated_at FROM workflow_instances WHERE alert_id = ? LIMIT ?", alert, failedInstanceLimit
  ))), (rows) => summarizeFailedInstances(alert, rows))
}

/** The claiming keys and what each claims. */
export const byKey = { dead_letters: deadLetters, workflows_failed: failedInstances } as const
