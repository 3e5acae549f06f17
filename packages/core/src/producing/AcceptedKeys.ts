/**
 * Idempotency keys accepted at the HTTP edge: `(tenant, idempotency_key) →
 * payload hash` in D1 (`accepted_keys`), checked and recorded in ONE round trip
 * per request (one `batch()`, whatever the number of events).
 *
 * The hash is SHA-256 (hex) of the stable JSON (sorted keys) of
 * `{ message_type, schema_version, subject, payload }`: what the event says.
 * `message_id`, `created_at`, `correlation_id`, `source` are metadata of one
 * send and may differ between retries; the tenant is part of the key.
 *
 * `record` does not decide anything: it returns the hashes stored before this
 * request, and records the request's keys only if none of them is stored with
 * another hash (a refused request records nothing). It does not dedupe the
 * queue: downstream consumers dedupe by key (the ledger), which is why a replay
 * can be sent again safely.
 *
 * `claim` is the same binding for the events consumer (producers that hold the
 * queue binding never pass the HTTP edge): per key, the first hash seen — over
 * HTTP or through the queue — is the one the key is bound to. Each key is
 * claimed on its own (no all-or-nothing: messages are settled one by one), in
 * one round trip per batch, and the stored hash is returned for every key, so
 * the caller refuses those bound to another payload.
 *
 * `prune` forgets expired keys without an index on `accepted_at` (one that cost a
 * row written per key on insert and again on delete): it walks the primary key,
 * a window of `limit` keys per call from where the previous call stopped (kept per
 * database in `sweep_cursors`), deletes the expired keys of the window, and starts
 * over from the first key after the last. Rows read are what it spends (D1 bills
 * them at a thousandth of a row written); docs/operating.md sizes the window.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Layer from "effect/Layer"
import { tenantKey } from "@factline/schemas"
import * as StableJson from "../ledger/StableJson.js"
import * as Sql from "../platform/Sql.js"
import * as Placement from "../placement/Placement.js"
import { claimUnseen, deleteExpiredInWindow, insertUnlessConflict, parseCursor, selectBound, selectCursor, selectStored, selectWindowEnd, sweep, table, upsertCursor } from "./AcceptedKeysStatements.js"
import * as Failure from "../failures/Failure.js"

export interface Entry {
  readonly idempotency_key: string
  readonly payload_hash: string
  readonly message_type: string
  readonly subject: string
}

export interface Claim extends Entry {
  readonly tenant_id: string
  /**
   * The edge bound this key to this payload already and said so (a verified key receipt, KeyReceipts.ts): the
   * claim answers that binding without a round trip, after the placement check every claim makes.
   */
  readonly receipted?: boolean
}

/** What a key is bound to: the payload hash it was first accepted with, and when. */
export interface Bound {
  readonly payload_hash: string
  readonly accepted_at: string
}

/** What a claimed key is bound to, or why it cannot be claimed now (its tenant's writes are held by a move: retry). */
export type Claimed = Bound | { readonly held: Failure.Unavailable }

export const claimKey = tenantKey

/** The store over one database (the one in scope, for callers: `AcceptedKeys`). */
export interface Shape {
  /**
   * Returns `idempotency_key → payload_hash` for the keys of `entries` that were
   * accepted before; records the others, unless one of `entries` is stored with
   * another hash (then nothing is recorded).
   */
  readonly record: (
    tenantId: string,
    entries: ReadonlyArray<Entry>,
    now: string
  ) => Effect.Effect<ReadonlyMap<string, string>, Sql.SqlFailure>
  /**
   * Binds each `(tenant, key)` of `entries` not seen before to its hash (the first
   * entry of a key wins when one batch carries two), and returns the hash every
   * key is bound to now, by `claimKey(tenant, key)`.
   */
  readonly claim: (entries: ReadonlyArray<Claim>, now: string) => Effect.Effect<ReadonlyMap<string, Claimed>, Sql.SqlFailure>
  /**
   * Walks the next `limit` keys of each database (by primary key, from where the last call stopped; after the
   * last key, from the first again) and forgets those accepted before `before` (ISO-8601); returns how many
   * were deleted — or, for a tenant `byTenant` names, before its own cutoff (`FACTLINE_KEY_RETENTION_DAYS`,
   * KeyRetention). A forgotten key may be bound to a new payload afterwards.
   */
  readonly prune: (before: string, limit: number, now: string, byTenant?: Readonly<Record<string, string>>) => Effect.Effect<number, Sql.SqlFailure>
}

export class AcceptedKeys extends Context.Service<AcceptedKeys, Shape>()("@factline/core/AcceptedKeys") {
  /** Each tenant's keys in its read database (Placement): a claim of many tenants is one round trip per database, in parallel. */
  static readonly layer = Layer.effect(AcceptedKeys, Effect.map(Effect.service(Placement.TenantPlacement), (placement) => placed(placement)))
  /** In memory, for tests of code above the edge. */
  static readonly memory = () => Layer.sync(AcceptedKeys, () => memory())
}

/** The hash an idempotency key is bound to (see the module comment). */
export const payloadHash = async (event: {
  readonly message_type: string
  readonly schema_version: number
  readonly subject: string
  readonly payload?: unknown
}): Promise<string> => {
  const text = StableJson.stringify({
    message_type: event.message_type,
    schema_version: event.schema_version,
    subject: event.subject,
    payload: event.payload
  })
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)))
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("")
}

/**
 * Rows per statement. Each statement binds 4 parameters whatever its size (rows
 * travel as one JSON parameter read with `json_each`), far under D1's 100; the
 * chunking only bounds the size of one JSON parameter.
 */
const rowsPerStatement = 200

export { claimUnseen, deleteExpiredInWindow, insertUnlessConflict, selectBound, selectCursor, selectStored, selectWindowEnd, sweep, upsertCursor } from "./AcceptedKeysStatements.js"

const unavailable = Failure.unavailable("the idempotency store")

const SweepCursor = Schema.Struct({ after: Schema.NullOr(Schema.String), pass_started_at: Schema.String })
const Key = Schema.Struct({ tenant_id: Schema.String, idempotency_key: Schema.String })
const BoundRow = Schema.Struct({ tenant_id: Schema.String, idempotency_key: Schema.String, payload_hash: Schema.String, accepted_at: Schema.String })
const StoredRow = Schema.Struct({ idempotency_key: Schema.String, payload_hash: Schema.String })

/** The store routed by tenant to each tenant's read database. */
export const placed = (placement: Placement.Shape): Shape => {
  const on = Placement.perDatabase(make)
  return {
    record: (tenantId, entries, now) => Effect.flatMap(Placement.door(placement, tenantId, true), (sql) => on(sql).record(tenantId, entries, now)),
    claim: (entries, now) =>
      Effect.flatMap(Placement.groupedForWrites(placement, entries, (e) => e.tenant_id), ({ groups, held }) =>
        Effect.map(
          Effect.forEach(groups, (group) => claimReceipted(group.items, now, (rest) => on(group.sql).claim(rest, now)), { concurrency: "unbounded" }),
          (bound) => new Map<string, Claimed>([
            ...bound.flatMap((m) => [...m]),
            // A tenant being moved: its keys wait (and its messages with them); the other tenants' are claimed.
            ...held.map(({ item, failure }) => [claimKey(item.tenant_id, item.idempotency_key), { held: failure }] as const)
          ])
        )),
    prune: (before, limit, now, byTenant) =>
      Effect.map(Effect.forEach(placement.everywhere, (sql) => on(sql).prune(before, limit, now, byTenant)), (counts) => counts.reduce((a, b) => a + b, 0))
  }
}

/**
 * Receipted entries answer their own binding (the edge made it and signed it); the rest are claimed by `claim`
 * — not at all (no round trip) when every entry is receipted.
 */
const claimReceipted = <B extends Claimed, E>(
  entries: ReadonlyArray<Claim>,
  now: string,
  claim: (rest: ReadonlyArray<Claim>) => Effect.Effect<ReadonlyMap<string, B>, E>
): Effect.Effect<ReadonlyMap<string, B | Bound>, E> => {
  const rest = entries.filter((e) => e.receipted !== true)
  const own = (bound: ReadonlyMap<string, B>): ReadonlyMap<string, B | Bound> => {
    if (rest.length === entries.length) return bound
    const all = new Map<string, B | Bound>(bound)
    for (const e of entries) {
      const key = claimKey(e.tenant_id, e.idempotency_key)
      // A key claimed by an unreceipted copy in this batch answers what is stored; otherwise the receipt's binding.
      if (e.receipted === true && !all.has(key)) all.set(key, { payload_hash: e.payload_hash, accepted_at: now })
    }
    return all
  }
  return rest.length === 0 ? Effect.succeed(own(new Map())) : Effect.map(claim(rest), own)
}

export const make = (sql: Sql.Sql): Shape => ({
  prune: Effect.fn("AcceptedKeys.prune")(function*(before, limit, now, byTenant = {}) {
    const window = Math.max(1, Math.floor(limit))
    const stored = yield* sql.first(SweepCursor, Sql.statement(selectCursor, sweep))
    const after = parseCursor(stored?.after)
    const end = yield* sql.first(
      Key,
      Sql.statement(selectWindowEnd(after === undefined), after?.[0] ?? null, after?.[1] ?? null, window - 1)
    )
    // The window ends at its last key (the next call starts after it), or at the table's end (the next call starts over).
    const next = end === undefined ? null : JSON.stringify([end.tenant_id, end.idempotency_key])
    const passStartedAt = after === undefined || stored === undefined ? now : stored.pass_started_at
    const [deleted] = yield* sql.batch([
      Sql.statement(deleteExpiredInWindow(after === undefined, end === undefined), after?.[0] ?? null, after?.[1] ?? null, end?.tenant_id ?? null, end?.idempotency_key ?? null, before, JSON.stringify(byTenant)),
      Sql.statement(upsertCursor, sweep, next, passStartedAt, now)
    ])
    return deleted?.changes ?? 0
  }, Effect.mapError(unavailable)),
  claim: Effect.fn("AcceptedKeys.claim")(function*(entries, now) {
    if (entries.length === 0) return new Map<string, Bound>() as ReadonlyMap<string, Bound>
    const chunks = Sql.chunks(entries, rowsPerStatement).map((rows) =>
      JSON.stringify(rows.map((e) => [e.tenant_id, e.idempotency_key, e.payload_hash, e.message_type, e.subject]))
    )
    // One batch (one round trip, one transaction): every claim first, then what each key is bound to.
    return yield* sql.batch([
      ...chunks.map((rows) => Sql.statement(claimUnseen, rows, now)),
      ...chunks.map((rows) => Sql.statement(selectBound, rows))
    ], BoundRow).pipe(
      Effect.map((results) => {
        const bound = new Map<string, Bound>()
        for (const result of results.slice(chunks.length)) {
          for (const row of result.rows) bound.set(claimKey(row.tenant_id, row.idempotency_key), { payload_hash: row.payload_hash, accepted_at: row.accepted_at })
        }
        return bound as ReadonlyMap<string, Bound>
      }),
      Effect.mapError(unavailable)
    )
  }),
  record: Effect.fn("AcceptedKeys.record")(function*(tenantId, entries, now) {
    if (entries.length === 0) return new Map<string, string>() as ReadonlyMap<string, string>
    const chunks = Sql.chunks(entries, rowsPerStatement).map((rows) =>
      JSON.stringify(rows.map((e) => [e.idempotency_key, e.payload_hash, e.message_type, e.subject]))
    )
    const all = JSON.stringify(entries.map((e) => [e.idempotency_key, e.payload_hash]))
    // One batch (one round trip, one transaction): every SELECT first, so they see the state before this request.
    return yield* sql.batch([
      ...chunks.map((rows) => Sql.statement(selectStored, tenantId, rows)),
      ...chunks.map((rows) => Sql.statement(insertUnlessConflict, tenantId, rows, all, now))
    ], StoredRow).pipe(
      Effect.map((results) => {
        const stored = new Map<string, string>()
        for (const result of results.slice(0, chunks.length)) {
          for (const row of result.rows) stored.set(row.idempotency_key, row.payload_hash)
        }
        return stored as ReadonlyMap<string, string>
      }),
      Effect.mapError(unavailable)
    )
  })
})

/** The tenant of a `claimKey` (tenant ids hold no `/`). */
const tenantOfKey = (key: string) => key.slice(0, key.indexOf("/"))

export const memory = (): Shape => {
  const rows = new Map<string, string>()
  const at = new Map<string, string>()
  let cursor: string | undefined
  return {
    // As the database's: a window of `limit` keys (in key order) after the cursor, its expired keys deleted.
    prune: (before, limit, _now, byTenant = {}) =>
      Effect.sync(() => {
        const window = [...at.keys()].sort().filter((key) => cursor === undefined || key > cursor).slice(0, Math.max(1, Math.floor(limit)))
        cursor = window.length === Math.max(1, Math.floor(limit)) ? window.at(-1) : undefined
        const old = window.filter((key) => at.get(key)! < (byTenant[tenantOfKey(key)] ?? before))
        for (const key of old) (rows.delete(key), at.delete(key))
        return old.length
      }),
    claim: (entries, now) =>
      claimReceipted(entries, now, (rest) => Effect.sync(() => {
        const bound = new Map<string, Bound>()
        for (const e of rest) {
          const key = claimKey(e.tenant_id, e.idempotency_key)
          if (!rows.has(key)) (rows.set(key, e.payload_hash), at.set(key, now))
          bound.set(key, { payload_hash: rows.get(key)!, accepted_at: at.get(key) ?? now })
        }
        return bound as ReadonlyMap<string, Bound>
      })),
    record: (tenantId, entries, now) =>
      Effect.sync(() => {
        const stored = new Map<string, string>()
        for (const e of entries) {
          const hash = rows.get(claimKey(tenantId, e.idempotency_key))
          if (hash !== undefined) stored.set(e.idempotency_key, hash)
        }
        const conflict = entries.some((e) => stored.has(e.idempotency_key) && stored.get(e.idempotency_key) !== e.payload_hash)
        if (!conflict) {
          for (const e of entries) {
            if (!stored.has(e.idempotency_key)) (rows.set(claimKey(tenantId, e.idempotency_key), e.payload_hash), at.set(claimKey(tenantId, e.idempotency_key), now))
          }
        }
        return stored
      })
  }
}
