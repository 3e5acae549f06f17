/**
 * Erasing a data subject's personal data in one call (`POST /v1/subjects/:subject/erase`): a resumable operation of
 * the batch queue (operation `erase`), run as a move is (placement/Move.ts) — one step per message, the phase and
 * progress recorded in `subject_erasures` (the tenant's read database, owned here; a move copies it), each step
 * idempotent, so a redelivered or crashed step redoes nothing harmful.
 *
 * 1. **keys** — the subject's keys destroyed in the tenant's key store (`KeyRing.erase`, idempotent): from then on
 *    every sealed personal field of the subject, in every store (ledger, queues, facts copy, archive, payloads),
 *    opens as the marker `"[erased]"`. The generations and the store's erasure time are recorded.
 * 2. **waiting** — until `keys_erased_at + keyRing.cacheBoundMs`: every isolate has dropped a cached key by then,
 *    so nothing opens the subject's data again and writes plaintext derived from it (the step re-enqueues itself
 *    with that delay; it never sleeps). A running projection rebuild is waited out too (its shadow table would
 *    bring back rows mapped before the keys went).
 * 3. **cleaning** — what was derived in plaintext, store by store (each recorded when done): every projection's
 *    rows of the subject as its `erasure` declares (`delete` them, `mask` columns to the marker; `none` nothing);
 *    the error texts of its dead letters (`last_error` to the marker, `stack` null), the response snippets and errors
 *    of its webhook attempts, its runs' errors and kept bodies (platform database) — found by their `data_subject` —
 *    the workflow instances' errors (through the facts copy), and export files holding the subject (ErasureExports.ts).
 * 4. **audit** — the `subject_erased` fact (PlatformFacts; no personal data) appended to the stream
 *    `factline/erasures` (its id derived from the erasure's: a repeat finds it) and relayed; the erasure ends **erased**
 *    with its report.
 *
 * **failed** — a step failing on its last attempt (or permanently) ends the erasure `failed` with its error and the
 * phase it failed in; a new `POST …/erase` resumes it from that phase. A repeat `POST` while one runs (one still at
 * `keys` gets its first step sent again: a lost reply may have left it unsent), or after one has finished, answers it — unless the subject sent personal data since (a live key generation,
 * `KeyRing.state`): a new erasure of it starts. Not reached (docs/personal-data.md): messages in flight (sealed: they
 * open as the marker once consumed), what webhook receivers hold, SQLite's free pages.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { BatchPayload } from "@factline/schemas"
import { ErasureView, erasurePhases } from "../api/Subjects.js"
import * as PlatformFacts from "../definitions/PlatformFacts.js"
import * as Failure from "../failures/Failure.js"
import * as FactId from "../ledger/FactId.js"
import { Ledger } from "../ledger/Ledger.js"
import { KeyRing } from "../personal/KeyRing.js"
import type * as Move from "../placement/Move.js"
import * as Sql from "../platform/Sql.js"
import * as Time from "../platform/Time.js"
import type * as Consumer from "../consuming/Consumer.js"
import { relayFor } from "../relay/FactRelay.js"
import * as Stores from "./ErasureStores.js"

export const phases = erasurePhases
export type Phase = (typeof phases)[number]
/** The stream of a tenant's erasure records (`subject_erased` facts). */
export const auditStream = "factline/erasures"
/** How long the cleaning waits for a running projection rebuild (or export from before the keys went) before it looks again. */
export const rebuildWaitMs = 30_000

/** Per store, a count per action. */
export type PerStore = Readonly<Record<string, Readonly<Record<string, number>>>>

/** What `subject_erasures.progress` holds. */
export interface Progress {
  readonly generations?: ReadonlyArray<number>
  readonly keys_erased_at?: string
  readonly clean_after?: string
  /** The stores cleaned, in order. */
  readonly cleaned?: ReadonlyArray<string>
  readonly removed: PerStore
  readonly audit_fact_id?: string
  /** The phase a failed erasure failed in: where a new request resumes it. */
  readonly failed_in?: Phase
}

/** An erasure's row in `subject_erasures`. */
export const Row = Schema.Struct({
  id: Schema.String,
  tenant_id: Schema.String,
  subject: Schema.String,
  phase: Schema.Literals(phases),
  progress: Schema.String,
  report: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  requested_by: Schema.String,
  started_at: Schema.String,
  updated_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
})
export type Row = typeof Row.Type

export const View = ErasureView
export type View = typeof View.Type

const Id = Schema.Struct({ id: Schema.String })

const unavailable = Failure.unavailable("the read database")
const platformUnavailable = Failure.unavailable("the platform database")

export const progressOf = (row: Pick<Row, "progress">): Progress => {
  const parsed = JSON.parse(row.progress) as Partial<Progress>
  return { ...parsed, removed: parsed.removed ?? {} }
}

export const view = (row: Row): View => {
  const progress = progressOf(row)
  return {
    erasure_id: row.id,
    tenant_id: row.tenant_id,
    subject: row.subject,
    phase: row.phase,
    generations_erased: progress.generations ?? [],
    keys_erased_at: progress.keys_erased_at ?? null,
    clean_after: progress.clean_after ?? null,
    removed: progress.removed,
    audit_fact_id: progress.audit_fact_id ?? null,
    error: row.error,
    requested_by: row.requested_by,
    started_at: row.started_at,
    updated_at: row.updated_at,
    finished_at: row.finished_at
  }
}

/** An erasure's record, by id (in the tenant's read database: call within its placement scope). */
export const find = Effect.fn("Erasure.find")(function*(id: string) {
  const sql = yield* Sql.ReadDatabase
  return yield* Effect.mapError(sql.first(Row, Sql.statement("SELECT * FROM subject_erasures WHERE id = ?", id)), unavailable)
})

/** The subject's latest erasure in the tenant, if any. */
export const latest = Effect.fn("Erasure.latest")(function*(tenantId: string, subject: string) {
  const sql = yield* Sql.ReadDatabase
  return yield* Effect.mapError(sql.first(Row, Sql.statement(
    "SELECT * FROM subject_erasures WHERE tenant_id = ? AND subject = ? ORDER BY started_at DESC, id DESC LIMIT 1", tenantId, subject
  )), unavailable)
})

/**
 * Starts erasing `subject` in `tenantId` (within the tenant's write scope): records the erasure; the record and its
 * first step to enqueue. Answers a running erasure of the subject, or a finished one when the subject has no live key
 * generation since, without a step; starts a new one after a finished one when it has; resumes a failed one from
 * the phase it failed in.
 */
export const start = Effect.fn("Erasure.start")(function*(tenantId: string, subject: string, requestedBy: string) {
  const sql = yield* Sql.ReadDatabase
  const platform = yield* Sql.PlatformDatabase
  const last = yield* latest(tenantId, subject)
  const step = (id: string): BatchPayload => ({ batch_id: id, operation: "erase", offset: 0, total: 0 })
  // Still at its first phase: its first step may never have been sent (the INSERT's reply lost); sent again (steps are idempotent).
  if (last !== undefined && last.phase === "keys") return { record: last, first: { ...step(last.id), offset: yield* Time.millis } }
  if (last !== undefined && last.phase !== "failed" && last.phase !== "erased") return { record: last, first: undefined }
  // A finished erasure is answered again unless the subject has sent personal data since (a live key generation): that is new work.
  if (last?.phase === "erased" && (yield* (yield* KeyRing).state(tenantId, subject)).live.length === 0) return { record: last, first: undefined }
  const deleting = yield* Effect.mapError(platform.first(Id, Sql.statement("SELECT id FROM tenant_deletions WHERE tenant_id = ? AND phase NOT IN ('deleted', 'failed') LIMIT 1", tenantId)), platformUnavailable)
  if (deleting) return yield* new Failure.Conflict({ message: `tenant ${tenantId} is being deleted (${deleting.id}): its whole data goes, the subject's with it` })
  const now = yield* Time.now
  if (last !== undefined && last.phase === "failed") {
    const progress = progressOf(last)
    const resumeAt = progress.failed_in ?? "keys"
    const { failed_in: _, ...rest } = progress
    // Resumed from where it failed (an offset of its own: the inbox must not take the new first step for the old one's).
    const resumed = yield* Effect.mapError(sql.run(Sql.statement(
      "UPDATE subject_erasures SET phase = ?2, progress = ?3, error = NULL, finished_at = NULL, updated_at = ?4 WHERE id = ?1 AND phase = 'failed'",
      last.id, resumeAt, JSON.stringify(rest), now
    )), unavailable)
    const record = (yield* find(last.id))!
    return { record, first: resumed > 0 ? { ...step(last.id), offset: Date.parse(now) } : undefined }
  }
  const id = `er_${(yield* Time.millis).toString(36)}_${crypto.randomUUID().slice(0, 8)}`
  // One at a time: inserted only when none is in progress or started after the one read (concurrent requests start one).
  const inserted = yield* Effect.mapError(sql.run(Sql.statement(
    `INSERT INTO subject_erasures (id, tenant_id, subject, phase, progress, requested_by, started_at, updated_at)
     SELECT ?1, ?2, ?3, 'keys', ?4, ?5, ?6, ?6
     WHERE NOT EXISTS (SELECT 1 FROM subject_erasures WHERE tenant_id = ?2 AND subject = ?3
       AND (phase NOT IN ('failed', 'erased') OR (started_at, id) > (?7, ?8)))`,
    id, tenantId, subject, JSON.stringify({ removed: {} } satisfies Progress), requestedBy, now, last?.started_at ?? "", last?.id ?? ""
  )), unavailable)
  if (inserted === 0) return { record: (yield* latest(tenantId, subject))!, first: undefined }
  return { record: (yield* find(id))!, first: step(id) }
})

/** What one step works with. */
interface Step {
  readonly erasure: Row
  readonly sql: Sql.Sql
  readonly progress: Progress
  readonly now: number
  readonly next: (delayMs?: number) => Move.Next
}

/** Records the phase and progress (each left as it is when not given); the next message. */
const record = (s: Step, fields: { phase?: Phase; progress?: Progress }, delayMs = 0) =>
  Effect.as(
    Effect.mapError(s.sql.run(Sql.statement(
      "UPDATE subject_erasures SET phase = COALESCE(?2, phase), progress = COALESCE(?3, progress), updated_at = ?4 WHERE id = ?1 AND phase NOT IN ('erased', 'failed')",
      s.erasure.id, fields.phase ?? null, fields.progress ? JSON.stringify(fields.progress) : null, new Date(s.now).toISOString()
    )), unavailable),
    s.next(delayMs)
  )

/** keys: the subject's keys destroyed (a repeat destroys nothing more and reads the same generations). */
const keys = (s: Step) =>
  Effect.gen(function*() {
    const keyRing = yield* KeyRing
    const answer = yield* keyRing.erase(s.erasure.tenant_id, s.erasure.subject, new Date(s.now).toISOString())
    const erasedAt = answer.erasedAt ?? new Date(s.now).toISOString()
    const cleanAfter = new Date(Math.max(Date.parse(erasedAt), s.now) + keyRing.cacheBoundMs).toISOString()
    // This erasure's generations: the subject's, less those an earlier erasure of it destroyed (the same on a repeat).
    const earlier = yield* Stores.erasedBefore(s.sql, s.erasure)
    const generations = answer.generations.filter((g) => !earlier.has(g))
    const progress: Progress = { ...s.progress, generations, keys_erased_at: erasedAt, clean_after: cleanAfter }
    return yield* record(s, { phase: "waiting", progress }, Date.parse(cleanAfter) - s.now)
  })

/** cleaning: once the key cache's bound has passed and no rebuild or export from before runs, each store cleaned and recorded in turn. */
const cleaning = (s: Step) =>
  Effect.gen(function*() {
    const cleanAfter = s.progress.clean_after ?? new Date(s.now).toISOString()
    if (Date.parse(cleanAfter) > s.now) return s.next(Date.parse(cleanAfter) - s.now)
    const running = yield* Stores.running(s.sql, s.erasure.tenant_id, cleanAfter)
    if (running) return yield* Effect.as(Effect.logInfo(`erasure ${s.erasure.id}: ${running} is running; cleaning after it`), s.next(rebuildWaitMs))
    let progress = s.progress
    for (const cleaner of yield* Stores.cleaners(s.sql, s.erasure.tenant_id, s.erasure.subject, { erasureId: s.erasure.id, cleanAfter, now: new Date(s.now).toISOString() })) {
      if (progress.cleaned?.includes(cleaner.store)) continue
      const counts = yield* cleaner.clean
      progress = { ...progress, cleaned: [...(progress.cleaned ?? []), cleaner.store], removed: { ...progress.removed, [cleaner.store]: counts } }
      yield* record({ ...s, progress }, { progress })
    }
    return yield* record(s, { phase: "audit", progress })
  })

/** audit: the `subject_erased` fact appended (found on a repeat) and relayed; the erasure ends with its report. */
const audit = (s: Step) =>
  Effect.gen(function*() {
    const { erasure, progress } = s
    const factId = yield* Effect.promise(() => FactId.make({ tenantId: erasure.tenant_id, cause: `erasure:${erasure.id}`, decidedBy: "factline-erasure", position: 0 }))
    const ledger = yield* Ledger
    const [outcome] = yield* Effect.mapError(ledger.append([{
      tenant_id: erasure.tenant_id,
      stream: auditStream,
      facts: [{
        fact_id: factId,
        type: PlatformFacts.SubjectErased.type,
        data: {
          erasure_id: erasure.id,
          subject: erasure.subject,
          generations: progress.generations ?? [],
          requested_by: erasure.requested_by,
          requested_at: erasure.started_at,
          keys_erased_at: progress.keys_erased_at ?? erasure.started_at,
          removed: progress.removed
        },
        causation_id: erasure.id,
        correlation_id: erasure.id,
        caused_by: "factline-erasure",
        created_at: new Date(s.now).toISOString()
      }]
    }]), Failure.unavailable("the ledger"))
    if (outcome?.status !== "appended" && outcome?.status !== "duplicate") {
      return yield* new Failure.Unavailable({ service: "the ledger", message: `the subject_erased fact could not be appended: ${outcome && "message" in outcome ? outcome.message : outcome?.status}` })
    }
    const unrelayed = new Map<string, Consumer.Outcome>()
    yield* relayFor(new Map([[erasure.id, outcome.facts]]), unrelayed)
    if (unrelayed.size > 0) return yield* new Failure.Unavailable({ service: "the queues", message: "the subject_erased fact could not be relayed" })
    const finishedAt = new Date(s.now).toISOString()
    const done: Progress = { ...progress, audit_fact_id: factId }
    yield* Effect.mapError(s.sql.run(Sql.statement(
      "UPDATE subject_erasures SET phase = 'erased', progress = ?2, report = ?3, updated_at = ?4, finished_at = ?4 WHERE id = ?1 AND phase = 'audit'",
      erasure.id, JSON.stringify(done), JSON.stringify(done.removed), finishedAt
    )), unavailable)
    return undefined
  })

/** Runs one step of an erasure (within the tenant's write scope); the next message (after a delay), or undefined when it has ended. */
export const step = Effect.fn("Erasure.step")(function*(payload: BatchPayload) {
  const sql = yield* Sql.ReadDatabase
  const erasure = yield* find(payload.batch_id)
  if (!erasure || erasure.phase === "erased" || erasure.phase === "failed") return undefined
  const now = yield* Time.millis
  const next = (delayMs = 0): Move.Next => ({ payload: { ...payload, offset: payload.offset + 1 }, delaySeconds: Math.max(0, Math.ceil(delayMs / 1000)) })
  const s: Step = { erasure, sql, progress: progressOf(erasure), now, next }
  switch (erasure.phase) {
    case "keys":
      return yield* keys(s)
    case "waiting": {
      const wait = Date.parse(s.progress.clean_after ?? erasure.updated_at) - now
      if (wait > 0) return next(wait)
      return yield* record(s, { phase: "cleaning" })
    }
    case "cleaning":
      return yield* cleaning(s)
    case "audit":
      return yield* audit(s)
  }
})

/** Ends an erasure `failed` with `error`, remembering the phase it failed in (a new request resumes from there). */
export const fail = Effect.fn("Erasure.fail")(function*(id: string, error: string, now: string) {
  const sql = yield* Sql.ReadDatabase
  const erasure = yield* find(id)
  if (!erasure || erasure.phase === "erased" || erasure.phase === "failed") return
  const progress: Progress = { ...progressOf(erasure), failed_in: erasure.phase }
  yield* Effect.mapError(sql.run(Sql.statement(
    "UPDATE subject_erasures SET phase = 'failed', progress = ?2, error = ?3, updated_at = ?4, finished_at = ?4 WHERE id = ?1 AND phase NOT IN ('erased', 'failed')",
    id, JSON.stringify(progress), error.slice(0, 2_000), now
  )), unavailable)
})
