/**
 * The idempotency store's statements (AcceptedKeys), written from the Drizzle schema's names so a renamed column
 * fails to typecheck, and the sweep's stored cursor read back. Pure text; AcceptedKeys re-exports the statements.
 */
import { getTableName } from "drizzle-orm"
import { acceptedKeys, sweepCursors } from "../tables/PlatformTables.js"

// Names from the Drizzle schema, so a renamed column fails to typecheck here.
export const table = getTableName(acceptedKeys)
const column = {
  tenant: acceptedKeys.tenantId.name,
  key: acceptedKeys.idempotencyKey.name,
  hash: acceptedKeys.payloadHash.name,
  type: acceptedKeys.messageType.name,
  subject: acceptedKeys.subject.name,
  at: acceptedKeys.acceptedAt.name
}

// `CROSS JOIN` keeps the request's keys as the outer loop, so each is one primary-key search; with a
// plain JOIN SQLite's planner scanned all of the tenant's accepted keys per request (O(keys × batch)).
export const selectStored = `SELECT k.${column.key} AS idempotency_key, k.${column.hash} AS payload_hash
  FROM json_each(?2) j CROSS JOIN ${table} k ON k.${column.tenant} = ?1 AND k.${column.key} = json_extract(j.value, '$[0]')`

// ?3 is every [key, hash] of the request, so no chunk is recorded when any key of the request conflicts.
export const insertUnlessConflict = `INSERT INTO ${table} (${column.tenant}, ${column.key}, ${column.hash}, ${column.type}, ${column.subject}, ${column.at})
  SELECT ?1, json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]'), ?4
  FROM json_each(?2) j
  WHERE NOT EXISTS (
    SELECT 1 FROM json_each(?3) g CROSS JOIN ${table} k
      ON k.${column.tenant} = ?1 AND k.${column.key} = json_extract(g.value, '$[0]') AND k.${column.hash} <> json_extract(g.value, '$[1]')
  )
  ON CONFLICT (${column.tenant}, ${column.key}) DO NOTHING`

// Rows are [tenant, key, hash, type, subject]; in JSON order, so the first of two rows for one key is the one bound.
export const claimUnseen = `INSERT INTO ${table} (${column.tenant}, ${column.key}, ${column.hash}, ${column.type}, ${column.subject}, ${column.at})
  SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]'), json_extract(j.value, '$[4]'), ?2
  FROM json_each(?1) j WHERE true
  ON CONFLICT (${column.tenant}, ${column.key}) DO NOTHING`

export const selectBound = `SELECT k.${column.tenant} AS tenant_id, k.${column.key} AS idempotency_key, k.${column.hash} AS payload_hash, k.${column.at} AS accepted_at
  FROM json_each(?1) j CROSS JOIN ${table} k ON k.${column.tenant} = json_extract(j.value, '$[0]') AND k.${column.key} = json_extract(j.value, '$[1]')`

/** The name of this sweep's row in `sweep_cursors`. */
export const sweep = table
const cursors = {
  table: getTableName(sweepCursors),
  sweep: sweepCursors.sweep.name,
  after: sweepCursors.after.name,
  passStartedAt: sweepCursors.passStartedAt.name,
  updatedAt: sweepCursors.updatedAt.name
}
const keyOrder = `${column.tenant}, ${column.key}`

export const selectCursor = `SELECT ${cursors.after} AS after, ${cursors.passStartedAt} AS pass_started_at FROM ${cursors.table} WHERE ${cursors.sweep} = ?1`

/**
 * The window's last key: the `limit`-th key after the cursor (`?1, ?2`), found by walking the primary key;
 * none when fewer keys are left (the window then runs to the end of the table). Without a cursor, from the first key.
 */
export const selectWindowEnd = (fromStart: boolean) =>
  `SELECT ${column.tenant} AS tenant_id, ${column.key} AS idempotency_key FROM ${table}
    ${fromStart ? "" : `WHERE (${keyOrder}) > (?1, ?2)`} ORDER BY ${keyOrder} LIMIT 1 OFFSET ?3`

/**
 * Deletes the window's expired keys: after the cursor (`?1, ?2`, unless from the start), up to its last key (`?3, ?4`,
 * unless to the end); accepted before `?5`, or before the tenant's own cutoff in `?6` (a JSON object, tenant → cutoff).
 */
export const deleteExpiredInWindow = (fromStart: boolean, toEnd: boolean) =>
  `DELETE FROM ${table} WHERE ${column.at} < COALESCE((SELECT c.value FROM json_each(?6) c WHERE c.key = ${table}.${column.tenant}), ?5)
    ${fromStart ? "" : `AND (${keyOrder}) > (?1, ?2)`} ${toEnd ? "" : `AND (${keyOrder}) <= (?3, ?4)`}`

export const upsertCursor = `INSERT INTO ${cursors.table} (${cursors.sweep}, ${cursors.after}, ${cursors.passStartedAt}, ${cursors.updatedAt}) VALUES (?1, ?2, ?3, ?4)
  ON CONFLICT (${cursors.sweep}) DO UPDATE SET ${cursors.after} = excluded.${cursors.after}, ${cursors.passStartedAt} = excluded.${cursors.passStartedAt}, ${cursors.updatedAt} = excluded.${cursors.updatedAt}`

/** A stored cursor: the JSON array of a key, or nothing usable (start from the first key). */
export const parseCursor = (after: string | null | undefined): readonly [string, string] | undefined => {
  if (after === null || after === undefined) return undefined
  try {
    const value = JSON.parse(after) as unknown
    return Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === "string") ? [value[0] as string, value[1] as string] : undefined
  } catch {
    return undefined
  }
}
