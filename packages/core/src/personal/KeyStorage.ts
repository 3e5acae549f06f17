/**
 * A tenant's data subject keys, in the SQLite storage of one Durable Object per tenant (an object of the
 * LedgerShard class named `KeyStorage.objectName(tenant)`): one row per subject and key generation, the key
 * only wrapped (sealed by the platform key `FACTLINE_SECRETS_KEY`, webhooks/Secrets.ts) — the object never sees
 * a key in the clear. Erasure blanks a subject's wrapped keys and keeps the rows as tombstones (`erased_at`):
 * what was sealed under them can never be opened again, and a later event of the subject either gets the next
 * generation or, if the tenant says so, is refused. The object serializes calls, so two isolates creating the
 * first key of one subject at once agree on one.
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

/** The `DurableObjectStorage` surface the key store uses (the same as the ledger's). */
export interface Storage {
  readonly sql: Pick<SqlStorage, "exec">
  readonly transactionSync: <T>(closure: () => T) => T
}

/** The key store object of a tenant (a LedgerShard object; shards are `tenant/#n`, so the names never meet). */
export const objectName = (tenant: string) => `${tenant}/#keys`

/** The current key of a subject, created with `wrapped` if it has none (or its keys were erased and new ones are allowed). */
export interface CurrentRequest {
  readonly subject: string
  /** A fresh wrapped key, used only when the subject needs one. */
  readonly wrapped: string
}

export type CurrentAnswer =
  | { readonly subject: string; readonly generation: number; readonly wrapped: string }
  /** Erased before, and the tenant refuses new personal data of an erased subject. */
  | { readonly subject: string; readonly refused: true; readonly erasedAt: string }

export interface KeyRef {
  readonly subject: string
  readonly generation: number
}

/** A stored key: `wrapped` null once erased. */
export interface KeyAnswer extends KeyRef {
  readonly wrapped: string | null
}

export interface EraseAnswer {
  readonly subject: string
  /** Generations whose key this call destroyed (empty on a repeat: idempotent). */
  readonly erased: ReadonlyArray<number>
  /** Every generation the subject ever had. */
  readonly generations: ReadonlyArray<number>
  readonly erasedAt: string | null
}

/** The key store's calls, as the LedgerShard object answers them over RPC. */
export interface KeyStoreRpc {
  currentKeys(requests: ReadonlyArray<CurrentRequest>, options: { readonly refuseErased: boolean; readonly now: string }): Promise<ReadonlyArray<CurrentAnswer>>
  readKeys(refs: ReadonlyArray<KeyRef>): Promise<ReadonlyArray<KeyAnswer>>
  eraseKeys(subject: string, now: string): Promise<EraseAnswer>
  /** The subject's key generations: every one, and those not erased. */
  keyState(subject: string): Promise<KeyState>
}

export interface KeyState {
  readonly subject: string
  readonly generations: ReadonlyArray<number>
  readonly live: ReadonlyArray<number>
}

/** The Durable Object namespace holding the key stores (the LedgerShard class's), with stubs typed by the key store's calls. */
export interface KeyStoreNamespace {
  idFromName(name: string): DurableObjectId
  get(id: DurableObjectId): KeyStoreRpc
}

/** Where the key ring reaches the tenants' key stores: the LedgerShard namespace, seen through the key store's calls only. */
export class KeyStores extends Context.Service<KeyStores, { readonly namespace: KeyStoreNamespace }>()("@factline/core/KeyStores") {
  static readonly layer = (namespace: KeyStoreNamespace) => Layer.succeed(KeyStores, { namespace })
}

const KeyRow = Schema.Struct({ subject: Schema.String, generation: Schema.Number, wrapped: Schema.NullOr(Schema.String), erased_at: Schema.NullOr(Schema.String) })
const decodeKeyRow = Schema.decodeUnknownSync(KeyRow)

const ensure = (storage: Storage) =>
  storage.sql.exec(
    "CREATE TABLE IF NOT EXISTS subject_keys (subject TEXT NOT NULL, generation INTEGER NOT NULL, wrapped TEXT, created_at TEXT NOT NULL, erased_at TEXT, PRIMARY KEY (subject, generation)) WITHOUT ROWID"
  )

const latest = (storage: Storage, subject: string) => {
  const row = storage.sql.exec("SELECT subject, generation, wrapped, erased_at FROM subject_keys WHERE subject = ? ORDER BY generation DESC LIMIT 1", subject).toArray()[0]
  return row === undefined ? undefined : decodeKeyRow(row)
}

export const make = (storage: Storage): KeyStoreRpc => {
  let ready = false
  const ready_ = () => {
    if (!ready) {
      ensure(storage)
      ready = true
    }
  }
  return {
    currentKeys: async (requests, options) => {
      ready_()
      return storage.transactionSync(() =>
        requests.map((request): CurrentAnswer => {
          const row = latest(storage, request.subject)
          if (row !== undefined && row.wrapped !== null) return { subject: request.subject, generation: row.generation, wrapped: row.wrapped }
          if (row !== undefined && options.refuseErased) return { subject: request.subject, refused: true, erasedAt: row.erased_at ?? options.now }
          const generation = (row?.generation ?? 0) + 1
          storage.sql.exec("INSERT INTO subject_keys (subject, generation, wrapped, created_at, erased_at) VALUES (?, ?, ?, ?, NULL)", request.subject, generation, request.wrapped, options.now)
          return { subject: request.subject, generation, wrapped: request.wrapped }
        }))
    },
    readKeys: async (refs) => {
      ready_()
      return refs.map((ref) => {
        const row = storage.sql.exec("SELECT subject, generation, wrapped, erased_at FROM subject_keys WHERE subject = ? AND generation = ?", ref.subject, ref.generation).toArray()[0]
        return { subject: ref.subject, generation: ref.generation, wrapped: row === undefined ? null : decodeKeyRow(row).wrapped }
      })
    },
    keyState: async (subject) => {
      ready_()
      const rows = storage.sql.exec("SELECT subject, generation, wrapped, erased_at FROM subject_keys WHERE subject = ? AND generation > 0 ORDER BY generation", subject).toArray().map((row) => decodeKeyRow(row))
      return { subject, generations: rows.map((r) => r.generation), live: rows.filter((r) => r.wrapped !== null).map((r) => r.generation) }
    },
    eraseKeys: async (subject, now) => {
      ready_()
      return storage.transactionSync(() => {
        const rows = storage.sql.exec("SELECT subject, generation, wrapped, erased_at FROM subject_keys WHERE subject = ? ORDER BY generation", subject).toArray().map((row) => decodeKeyRow(row))
        const live = rows.filter((r) => r.wrapped !== null).map((r) => r.generation)
        if (live.length > 0) storage.sql.exec("UPDATE subject_keys SET wrapped = NULL, erased_at = ? WHERE subject = ? AND wrapped IS NOT NULL", now, subject)
        // A subject erased before it had a key still leaves its tombstone (generation 0): a tenant that refuses erased subjects refuses it.
        if (rows.length === 0) storage.sql.exec("INSERT INTO subject_keys (subject, generation, wrapped, created_at, erased_at) VALUES (?, 0, NULL, ?, ?)", subject, now, now)
        const erasedAt = live.length > 0 ? now : rows.map((r) => r.erased_at).filter((t): t is string => t !== null).sort().at(-1) ?? null
        return { subject, erased: live, generations: rows.map((r) => r.generation).filter((g) => g > 0), erasedAt: rows.length === 0 ? now : erasedAt }
      })
    }
  }
}
