/**
 * Webhook endpoints and deliveries in D1: the admin API's reads and writes
 * (tenant-scoped, every statement bound to the caller's tenant), the
 * consumer's config lookup (one query per batch for the tenants it has not
 * cached; configs are cached per isolate for `configTtlMs`, and a change made
 * through this isolate drops its tenant's entry at once), and the delivery
 * log. Secrets are sealed with AES-GCM before they are written and opened
 * only to sign; no method returns a stored secret except right after
 * creating or rotating it.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Issues } from "@factline/schemas"
import { tenantKey } from "@factline/schemas"
import * as Described from "../api/Webhooks.js"
import * as Sql from "../platform/Sql.js"
import * as Cursor from "../tables/Cursor.js"
import * as Secrets from "./Secrets.js"
import * as UrlGuard from "./UrlGuard.js"
import * as Placement from "../placement/Placement.js"
import * as DataSubject from "../personal/DataSubject.js"
import * as Failure from "../failures/Failure.js"
import * as Time from "../platform/Time.js"

/** An endpoint as the API shows it: never its secret. */
export interface Endpoint {
  readonly id: string
  readonly url: string
  readonly description: string | null
  readonly event_types: ReadonlyArray<string>
  readonly enabled: boolean
  readonly version: number
  readonly disabled_reason: string | null
  readonly failing_since: string | null
  /** While a rotated-out secret still signs beside the new one. */
  readonly previous_secret_expires_at: string | null
  /** At most this many POSTs started in any second (null: no limit); held across isolates (EndpointLimiter). */
  readonly max_per_second: number | null
  /** At most this many POSTs at once (null: no limit). */
  readonly max_in_flight: number | null
  readonly created_at: string
  readonly updated_at: string
}

/** What the delivery consumer needs of an endpoint: its config and the secrets that sign (current first). */
export interface EndpointConfig extends Endpoint {
  readonly tenant_id: string
  readonly secrets: ReadonlyArray<string>
}

export interface Settings {
  /** `FACTLINE_SECRETS_KEY`: base64 of 32 bytes. */
  readonly secretsKey: string | undefined
  /** Allows http and loopback endpoint URLs (never in production). */
  readonly localDevelopment: boolean
  readonly configTtlMs?: number
  /** `FACTLINE_WEBHOOK_ENDPOINTS_PER_TENANT`: the most endpoints a tenant may have (default 20). */
  readonly endpointsPerTenant?: number
  /** How long a rotated-out secret keeps signing. */
  readonly rotationOverlapMs?: number
}

export interface Input {
  readonly url?: unknown
  readonly event_types?: unknown
  readonly description?: unknown
  readonly enabled?: unknown
  readonly max_per_second?: unknown
  readonly max_in_flight?: unknown
}


export type AttemptRow = {
  readonly attempted_at: string
  readonly delivery_id: string
  readonly attempt: number
  readonly event_type: string
  readonly fact_id: string
  readonly succeeded: boolean
  readonly status_code: number | null
  readonly duration_ms: number
  readonly response_snippet: string | null
  readonly error: string | null
  /** Held back by the endpoint's limits: nothing sent, no attempt spent, sent again after a delay (`error` says how long). */
  readonly throttled: boolean
}

/** The store over one database (the one in scope, for callers: `WebhookStore`). */
export interface Shape {
  readonly create: (tenantId: string, input: Input) => Effect.Effect<{ readonly endpoint: Endpoint; readonly secret: string }, Failure.Any | Secrets.SecretsKeyError>
  /** A page of the tenant's endpoints, oldest first (keyset on created_at, id). */
  readonly list: (tenantId: string, page: { readonly after?: string; readonly limit: number }) => Effect.Effect<{ readonly data: ReadonlyArray<Endpoint>; readonly next_cursor: string | null }, Failure.Any | Secrets.SecretsKeyError>
  readonly get: (tenantId: string, id: string) => Effect.Effect<Endpoint, Failure.Any | Secrets.SecretsKeyError>
  readonly update: (tenantId: string, id: string, input: Input) => Effect.Effect<Endpoint, Failure.Any | Secrets.SecretsKeyError>
  readonly remove: (tenantId: string, id: string) => Effect.Effect<void, Failure.Any | Secrets.SecretsKeyError>
  readonly rotate: (tenantId: string, id: string) => Effect.Effect<{ readonly endpoint: Endpoint; readonly secret: string }, Failure.Any | Secrets.SecretsKeyError>
  readonly attempts: (tenantId: string, id: string, page: { readonly before?: string; readonly limit: number }) => Effect.Effect<{ readonly data: ReadonlyArray<AttemptRow>; readonly next_cursor: string | null }, Failure.Any | Secrets.SecretsKeyError>
  /** The stored delivery messages of the endpoint's failed deliveries since `since`, marked pending again. */
  readonly recover: (tenantId: string, id: string, since: string) => Effect.Effect<ReadonlyArray<unknown>, Failure.Any | Secrets.SecretsKeyError>
  /** Enabled and disabled endpoints of these tenants, with their signing secrets (cached per isolate). */
  readonly configsFor: (tenantIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, ReadonlyArray<EndpointConfig>>, Sql.SqlFailure | Secrets.SecretsKeyError>
  readonly invalidate: (tenantId: string) => void
  /** The recorded state of these deliveries (one query), by `tenant/delivery_id`. */
  readonly deliveryStates: (keys: ReadonlyArray<{ readonly tenant_id: string; readonly delivery_id: string }>) => Effect.Effect<ReadonlyMap<string, DeliveryState>, Sql.SqlFailure>
  /** Records a batch of attempts in ONE transaction; returns the endpoints it disabled (`tenant/id`). */
  readonly record: (batch: RecordBatch) => Effect.Effect<ReadonlySet<string>, Sql.SqlFailure>
  /** Resolves `event_types` / `fact_types` against the catalog (the API passes the registry's). */
  readonly settings: Settings
}

export class WebhookStore extends Context.Service<WebhookStore, Shape>()("@factline/core/WebhookStore") {
  /** Each tenant's endpoints, deliveries and attempts in its read database (Placement). */
  static readonly layer = (settings: Settings, catalog: Catalog) =>
    Layer.effect(WebhookStore, Effect.map(Effect.service(Placement.TenantPlacement), (placement) => placed(placement, settings, catalog)))
}

/** The store routed by tenant: a call of many tenants (a delivery batch) runs once per database, in parallel. */
export const placed = (placement: Placement.Shape, settings: Settings, catalog: Catalog): Shape => {
  const on = Placement.perDatabase((sql) => make(sql, settings, catalog))
  const read = (tenantId: string) => Effect.map(Placement.door(placement, tenantId, false), on)
  const write = (tenantId: string) => Effect.map(Placement.door(placement, tenantId, true), on)
  const merged = <K, V>(maps: ReadonlyArray<ReadonlyMap<K, V>>) => new Map(maps.flatMap((m) => [...m]))
  return {
    settings,
    create: (tenantId, input) => Effect.flatMap(write(tenantId), (s) => s.create(tenantId, input)),
    list: (tenantId, page) => Effect.flatMap(read(tenantId), (s) => s.list(tenantId, page)),
    get: (tenantId, id) => Effect.flatMap(read(tenantId), (s) => s.get(tenantId, id)),
    update: (tenantId, id, input) => Effect.flatMap(write(tenantId), (s) => s.update(tenantId, id, input)),
    remove: (tenantId, id) => Effect.flatMap(write(tenantId), (s) => s.remove(tenantId, id)),
    rotate: (tenantId, id) => Effect.flatMap(write(tenantId), (s) => s.rotate(tenantId, id)),
    attempts: (tenantId, id, page) => Effect.flatMap(read(tenantId), (s) => s.attempts(tenantId, id, page)),
    recover: (tenantId, id, since) => Effect.flatMap(write(tenantId), (s) => s.recover(tenantId, id, since)),
    invalidate: (tenantId) => {
      for (const sql of placement.everywhere) on(sql).invalidate(tenantId)
    },
    configsFor: (tenantIds) =>
      Effect.flatMap(Placement.grouped(placement, tenantIds, (t) => t, false), (groups) =>
        Effect.map(Effect.forEach(groups, (g) => on(g.sql).configsFor(g.items), { concurrency: "unbounded" }), merged)),
    deliveryStates: (keys) =>
      Effect.flatMap(Placement.grouped(placement, keys, (k) => k.tenant_id, false), (groups) =>
        Effect.map(Effect.forEach(groups, (g) => on(g.sql).deliveryStates(g.items), { concurrency: "unbounded" }), merged)),
    record: (batch) =>
      Effect.gen(function*() {
        const tenants = [...new Set([...batch.attempts, ...batch.deliveries, ...batch.endpoints].map((x) => x.tenant_id))]
        const groups = yield* Placement.grouped(placement, tenants, (t) => t, true)
        const disabled = yield* Effect.forEach(groups, (g) => {
          const mine = new Set(g.items)
          return on(g.sql).record({
            attempts: batch.attempts.filter((a) => mine.has(a.tenant_id)),
            deliveries: batch.deliveries.filter((d) => mine.has(d.tenant_id)),
            endpoints: batch.endpoints.filter((e) => mine.has(e.tenant_id)),
            now: batch.now
          })
        }, { concurrency: "unbounded" })
        return new Set(disabled.flatMap((d) => [...d])) as ReadonlySet<string>
      })
  }
}

export interface DeliveryState {
  readonly status: "pending" | "succeeded" | "failing" | "failed" | "skipped"
  readonly attempts: number
}

export interface RecordBatch {
  readonly attempts: ReadonlyArray<{ readonly tenant_id: string; readonly endpoint_id: string } & AttemptRow>
  readonly deliveries: ReadonlyArray<{
    readonly tenant_id: string
    readonly delivery_id: string
    readonly endpoint_id: string
    readonly fact_id: string
    readonly event_type: string
    readonly status: DeliveryState["status"]
    readonly attempts: number
    readonly last_status_code: number | null
    readonly last_attempted_at: string
    readonly message: unknown
  }>
  /** Per endpoint touched: whether any attempt succeeded, and a reason to disable it now (if any). */
  readonly endpoints: ReadonlyArray<{ readonly tenant_id: string; readonly endpoint_id: string; readonly succeeded: boolean; readonly disable?: string }>
  readonly now: string
}

/** The catalog as the store needs it: event types, and the event types published for a fact type. */
export interface Catalog {
  readonly eventTypes: ReadonlySet<string>
  readonly eventTypesOfFact: (factType: string) => ReadonlyArray<string>
}

/** `FACTLINE_WEBHOOK_ENDPOINTS_PER_TENANT`'s default. */
export const defaultEndpointsPerTenant = 20
/**
 * The most event types (or fact types) an endpoint lists, the longest description, and the highest
 * `max_per_second` and `max_in_flight`: as the API describes them (`@factline/core/api`'s Webhooks).
 */
export const { maxTypes, maxDescription, maxRateLimit } = Described

/** An endpoint's row in `webhook_endpoints`. */
const Row = Schema.Struct({
  tenant_id: Schema.String,
  id: Schema.String,
  url: Schema.String,
  description: Schema.NullOr(Schema.String),
  event_types: Schema.String,
  enabled: Schema.Number,
  version: Schema.Number,
  secret_sealed: Schema.String,
  previous_secret_sealed: Schema.NullOr(Schema.String),
  previous_secret_expires_at: Schema.NullOr(Schema.String),
  disabled_reason: Schema.NullOr(Schema.String),
  failing_since: Schema.NullOr(Schema.String),
  max_per_second: Schema.NullOr(Schema.Number),
  max_in_flight: Schema.NullOr(Schema.Number),
  created_at: Schema.String,
  updated_at: Schema.String
})
type Row = typeof Row.Type

/** An attempt's row (`succeeded` and `throttled` are stored as 0/1). */
const StoredAttempt = Schema.Struct({
  attempted_at: Schema.String,
  delivery_id: Schema.String,
  attempt: Schema.Number,
  event_type: Schema.String,
  fact_id: Schema.String,
  succeeded: Schema.Number,
  status_code: Schema.NullOr(Schema.Number),
  duration_ms: Schema.Number,
  response_snippet: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  throttled: Schema.Number
})
const FailedDelivery = Schema.Struct({ delivery_id: Schema.String, message: Schema.String })
const StoredState = Schema.Struct({
  tenant_id: Schema.String,
  delivery_id: Schema.String,
  status: Schema.Literals(["pending", "succeeded", "failing", "failed", "skipped"]),
  attempts: Schema.Number
})

const toEndpoint = (row: Row): Endpoint => ({
  id: row.id,
  url: row.url,
  description: row.description,
  event_types: JSON.parse(row.event_types) as Array<string>,
  enabled: row.enabled === 1,
  version: row.version,
  disabled_reason: row.disabled_reason,
  failing_since: row.failing_since,
  previous_secret_expires_at: row.previous_secret_expires_at,
  max_per_second: row.max_per_second ?? null,
  max_in_flight: row.max_in_flight ?? null,
  created_at: row.created_at,
  updated_at: row.updated_at
})

const unavailable = Failure.unavailable("the webhook store")

/** The store over one database: its settings, the per-isolate config cache, and its statements' helpers. */
interface Store {
  readonly sql: Sql.Sql
  readonly settings: Settings
  readonly catalog: Catalog
  readonly ttl: number
  readonly overlap: number
  readonly cap: number
  readonly cache: Map<string, { at: number; configs: ReadonlyArray<EndpointConfig> }>
  readonly key: ReturnType<typeof keyOf>
  readonly query: ReturnType<typeof queryOn>
  readonly run: ReturnType<typeof runOn>
  readonly row: ReturnType<typeof rowOn>
  readonly validate: (input: Input, creating: boolean) => ReturnType<typeof validate>
}

const keyOf = (settings: Settings) => () => Effect.tryPromise({ try: () => Secrets.importKey(settings.secretsKey), catch: (e) => e as Secrets.SecretsKeyError })
const queryOn = (sql: Sql.Sql) => <S extends Sql.Row>(row: S, text: string, ...params: Array<unknown>) => Effect.mapError(sql.all(row, Sql.statement(text, ...params)), unavailable)
const runOn = (sql: Sql.Sql) => (statements: ReadonlyArray<Sql.Statement>) => Effect.mapError(sql.batch(statements), unavailable)
const rowOn = (query: ReturnType<typeof queryOn>) => (tenantId: string, id: string) =>
  Effect.flatMap(query(Row, "SELECT * FROM webhook_endpoints WHERE tenant_id = ? AND id = ?", tenantId, id), (rows) =>
    rows[0] ? Effect.succeed(rows[0]) : Effect.fail(new Failure.NotFound({ message: `no webhook endpoint ${JSON.stringify(id.slice(0, 100))}` })))

/** Validates the fields given (all required on create); problems name the field and the rule. */
const validate = (settings: Settings, catalog: Catalog, input: Input, creating: boolean) => {
  const problems: Array<Issues.Problem> = []
  const out: { url?: string; event_types?: Array<string>; description?: string | null; enabled?: boolean; max_per_second?: number | null; max_in_flight?: number | null } = {}
  const known = new Set(["url", "event_types", "fact_types", "description", "enabled", "max_per_second", "max_in_flight"])
  for (const field of Object.keys(input)) if (!known.has(field)) problems.push({ path: field, message: "is not a known field (url, event_types, fact_types, description, enabled, max_per_second, max_in_flight)" })
  for (const field of ["max_per_second", "max_in_flight"] as const) {
    const value = input[field]
    if (value === undefined) continue
    if (value !== null && (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > maxRateLimit)) {
      problems.push({ path: field, message: `must be an integer from 1 to ${maxRateLimit}, or null for no limit` })
    } else out[field] = value
  }
  if (input.url !== undefined || creating) {
    if (typeof input.url !== "string") problems.push({ path: "url", message: "is required: the endpoint's https URL" })
    else {
      const checked = UrlGuard.check(input.url, { localDevelopment: settings.localDevelopment })
      if (checked.ok) out.url = checked.url.toString()
      else problems.push({ path: "url", message: checked.rule })
    }
  }
  const factTypes = (input as { fact_types?: unknown }).fact_types
  if (input.event_types !== undefined || factTypes !== undefined || creating) {
    const types: Array<string> = []
    const list = (value: unknown, path: string) => {
      if (value === undefined) return []
      if (!Array.isArray(value) || value.length === 0 || value.length > maxTypes || !value.every((v) => typeof v === "string")) {
        problems.push({ path, message: `must be a non-empty array of at most ${maxTypes} strings` })
        return []
      }
      return value as Array<string>
    }
    for (const t of list(input.event_types, "event_types")) {
      if (catalog.eventTypes.has(t)) types.push(t)
      else problems.push({ path: "event_types", message: `${JSON.stringify(t.slice(0, 100))} is not in the webhook event catalog (known: ${[...catalog.eventTypes].join(", ") || "none"})` })
    }
    for (const f of list(factTypes, "fact_types")) {
      const events = catalog.eventTypesOfFact(f)
      if (events.length > 0) types.push(...events)
      else problems.push({ path: "fact_types", message: `${JSON.stringify(f.slice(0, 100))} is not published as a webhook event` })
    }
    if (input.event_types === undefined && factTypes === undefined) problems.push({ path: "event_types", message: "is required: the catalog event types (or fact_types) to subscribe to" })
    out.event_types = [...new Set(types)].sort()
  }
  if (input.description !== undefined) {
    if (input.description !== null && (typeof input.description !== "string" || input.description.length > maxDescription)) {
      problems.push({ path: "description", message: `must be a string of at most ${maxDescription} characters` })
    } else out.description = input.description as string | null
  }
  if (input.enabled !== undefined) {
    if (typeof input.enabled !== "boolean") problems.push({ path: "enabled", message: "must be true or false" })
    else out.enabled = input.enabled
  }
  return problems.length > 0
    ? Effect.fail(new Failure.InvalidInput({ message: `the endpoint has ${Issues.summary(problems.length)}`, problems }))
    : Effect.succeed(out)
}

const createOf = ({ cap, cache, key, run, row, validate }: Store): Shape["create"] =>
  Effect.fn("WebhookStore.create")(function*(tenantId, input) {
    const valid = yield* validate(input, true)
    const secret = Secrets.generateSigningSecret()
    const sealed = yield* Effect.flatMap(key(), (k) => Effect.promise(() => Secrets.seal(k, secret)))
    const id = `we_${crypto.randomUUID().replace(/-/g, "").slice(0, 24)}`
    const now = yield* Time.now
    // The cap is checked inside the INSERT itself: concurrent creates cannot all pass a count read before them.
    const [inserted] = yield* run([
      Sql.statement(
        `INSERT INTO webhook_endpoints (tenant_id, id, url, description, event_types, enabled, version, secret_sealed, max_per_second, max_in_flight, created_at, updated_at)
         SELECT ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?
         WHERE (SELECT COUNT(*) FROM webhook_endpoints WHERE tenant_id = ?) < ? RETURNING id`
      , tenantId, id, valid.url!, valid.description ?? null, JSON.stringify(valid.event_types), valid.enabled === false ? 0 : 1, sealed, valid.max_per_second ?? null, valid.max_in_flight ?? null, now, now, tenantId, cap)
    ])
    cache.delete(tenantId)
    if ((inserted?.rows.length ?? 0) === 0) {
      return yield* new Failure.Conflict({
        code: "endpoint_limit",
        message: `this tenant already has ${cap} webhook endpoints, the most allowed (FACTLINE_WEBHOOK_ENDPOINTS_PER_TENANT = ${cap}); delete one or ask the operator to raise the setting`,
        details: { limit: cap, setting: "FACTLINE_WEBHOOK_ENDPOINTS_PER_TENANT" }
      })
    }
    return { endpoint: toEndpoint(yield* row(tenantId, id)), secret }
  })

const listOf = ({ query }: Store): Shape["list"] =>
  Effect.fn("WebhookStore.list")(function*(tenantId, page) {
    const after = page.after === undefined ? undefined : Cursor.decode(page.after, ["string", "string"])
    if (page.after !== undefined && !after) {
      return yield* new Failure.InvalidInput({ code: "invalid_query", message: "malformed cursor", problems: [{ path: "cursor", message: "malformed cursor; use next_cursor from a previous page" }] })
    }
    const rows = yield* query(Row, 
      `SELECT * FROM webhook_endpoints WHERE tenant_id = ? ${after ? "AND (created_at, id) > (?, ?)" : ""} ORDER BY created_at, id LIMIT ?`,
      tenantId, ...(after ?? []), page.limit + 1
    )
    const data = rows.slice(0, page.limit).map(toEndpoint)
    const last = data.at(-1)
    return { data, next_cursor: rows.length > page.limit && last ? Cursor.encode([last.created_at, last.id]) : null }
  })

const getOf = ({ row }: Store): Shape["get"] =>
  Effect.fn("WebhookStore.get")(function*(tenantId, id) {
    return yield* Effect.map(row(tenantId, id), toEndpoint)
  })

const updateOf = ({ cache, run, row, validate }: Store): Shape["update"] =>
  Effect.fn("WebhookStore.update")(function*(tenantId, id, input) {
    const valid = yield* validate(input, false)
    yield* row(tenantId, id)
    const sets: Array<string> = []
    const params: Array<unknown> = []
    if (valid.url !== undefined) sets.push("url = ?"), params.push(valid.url)
    if (valid.event_types !== undefined) sets.push("event_types = ?"), params.push(JSON.stringify(valid.event_types))
    if (valid.description !== undefined) sets.push("description = ?"), params.push(valid.description)
    if (valid.max_per_second !== undefined) sets.push("max_per_second = ?"), params.push(valid.max_per_second)
    if (valid.max_in_flight !== undefined) sets.push("max_in_flight = ?"), params.push(valid.max_in_flight)
    if (valid.enabled !== undefined) {
      sets.push("enabled = ?"), params.push(valid.enabled ? 1 : 0)
      // Enabling again starts a clean slate; disabling by hand says so.
      sets.push("disabled_reason = ?", "failing_since = NULL"), params.push(valid.enabled ? null : "disabled by an admin")
    }
    if (sets.length > 0) {
      yield* run([
        Sql.statement(`UPDATE webhook_endpoints SET ${sets.join(", ")}, version = version + 1, updated_at = ? WHERE tenant_id = ? AND id = ?`, ...params, yield* Time.now, tenantId, id)
      ])
    }
    cache.delete(tenantId)
    return toEndpoint(yield* row(tenantId, id))
  })

const removeOf = ({ cache, run, row }: Store): Shape["remove"] =>
  Effect.fn("WebhookStore.remove")(function*(tenantId, id) {
    yield* row(tenantId, id)
    yield* run([Sql.statement("DELETE FROM webhook_endpoints WHERE tenant_id = ? AND id = ?", tenantId, id)])
    cache.delete(tenantId)
  })

const rotateOf = ({ sql, overlap, cache, key, row }: Store): Shape["rotate"] =>
  Effect.fn("WebhookStore.rotate")(function*(tenantId, id) {
    const current = yield* row(tenantId, id)
    const secret = Secrets.generateSigningSecret()
    const sealed = yield* Effect.flatMap(key(), (k) => Effect.promise(() => Secrets.seal(k, secret)))
    const now = yield* Time.millis
    // Compare-and-swap on the version read: a rotation (or any change) that landed in between makes this one
    // a loser (409), so the secret it would answer is never one that a third rotation silently pushed out.
    const [result] = yield* Effect.mapError(sql.batch([
      Sql.statement(
        `UPDATE webhook_endpoints SET secret_sealed = ?, previous_secret_sealed = secret_sealed, previous_secret_expires_at = ?, version = version + 1, updated_at = ?
         WHERE tenant_id = ? AND id = ? AND version = ? RETURNING *`
      , sealed, new Date(now + overlap).toISOString(), new Date(now).toISOString(), tenantId, id, current.version)
    ], Row), unavailable)
    cache.delete(tenantId)
    const updated = result?.rows[0]
    if (updated === undefined) {
      return yield* new Failure.Conflict({ message: `webhook endpoint ${id} changed while its secret was being rotated (version ${current.version} is no longer current); nothing was rotated — read it and rotate again` })
    }
    return { endpoint: toEndpoint(updated), secret }
  })

const attemptsOf = ({ query, row }: Store): Shape["attempts"] =>
  Effect.fn("WebhookStore.attempts")(function*(tenantId, id, page) {
    yield* row(tenantId, id)
    const before = page.before === undefined ? undefined : Cursor.decode(page.before, ["string", "string", "integer"])
    if (page.before !== undefined) {
      if (!before) return yield* new Failure.InvalidInput({ message: "malformed cursor", problems: [{ path: "cursor", message: "malformed cursor; use next_cursor from a previous page" }] })
    }
    // `succeeded` and `throttled` are stored as 0/1.
    const rows = yield* query(
      StoredAttempt,
      `SELECT attempted_at, delivery_id, attempt, event_type, fact_id, succeeded, status_code, duration_ms, response_snippet, error, throttled
       FROM webhook_attempts WHERE tenant_id = ? AND endpoint_id = ?
       ${before ? "AND (attempted_at, delivery_id, attempt) < (?, ?, ?)" : ""}
       ORDER BY attempted_at DESC, delivery_id DESC, attempt DESC LIMIT ?`,
      tenantId, id, ...(before ?? []), page.limit + 1
    )
    const data = rows.slice(0, page.limit).map((r): AttemptRow => ({ ...r, succeeded: r.succeeded === 1, throttled: r.throttled === 1 }))
    const last = data.at(-1)
    const next = rows.length > page.limit && last
      ? Cursor.encode([last.attempted_at, last.delivery_id, last.attempt])
      : null
    return { data, next_cursor: next }
  })

const recoverOf = ({ query, run, row }: Store): Shape["recover"] =>
  Effect.fn("WebhookStore.recover")(function*(tenantId, id, since) {
    const endpoint = yield* row(tenantId, id)
    if (endpoint.enabled !== 1) return yield* new Failure.Conflict({ message: `endpoint ${id} is disabled (${endpoint.disabled_reason ?? "by an admin"}); enable it before recovering` })
    const rows = yield* query(
      FailedDelivery,
      `SELECT delivery_id, message FROM webhook_deliveries
       WHERE tenant_id = ? AND endpoint_id = ? AND status = 'failed' AND last_attempted_at >= ? ORDER BY last_attempted_at LIMIT 10000`,
      tenantId, id, since
    )
    if (rows.length > 0) {
      yield* run([
        Sql.statement(
          `UPDATE webhook_deliveries SET status = 'pending' WHERE tenant_id = ? AND delivery_id IN (SELECT value FROM json_each(?))`
        , tenantId, JSON.stringify(rows.map((r) => r.delivery_id)))
      ])
    }
    return rows.map((r) => JSON.parse(r.message) as unknown)
  })

const deliveryStatesOf = ({ query }: Store): Shape["deliveryStates"] =>
  Effect.fn("WebhookStore.deliveryStates")(function*(keys) {
    if (keys.length === 0) return new Map<string, DeliveryState>() as ReadonlyMap<string, DeliveryState>
    return yield* Effect.map(
      // json_each first (CROSS JOIN keeps that order), then the primary key per pair: no scan.
      query(
        StoredState,
        `SELECT d.tenant_id, d.delivery_id, d.status, d.attempts FROM json_each(?) AS k
         CROSS JOIN webhook_deliveries AS d ON d.tenant_id = json_extract(k.value, '$[0]') AND d.delivery_id = json_extract(k.value, '$[1]')`,
        JSON.stringify(keys.map((k) => [k.tenant_id, k.delivery_id]))
      ),
      (rows) => new Map(rows.map((r) => [tenantKey(r.tenant_id, r.delivery_id), { status: r.status, attempts: r.attempts }] as const))
    )
  })

const recordOf = ({ cache, run }: Store): Shape["record"] =>
  Effect.fn("WebhookStore.record")(function*(batch) {
    const statements: Array<Sql.Statement> = []
    if (batch.attempts.length > 0) {
      // The data subject of each attempt's delivered fact (from its delivery message in the same batch), for its erasure.
      const dataSubjectOf = yield* DataSubject.current
      const subjects = new Map(batch.deliveries.map((d) => [tenantKey(d.tenant_id, d.delivery_id), dataSubjectOf(d.message)] as const))
      statements.push(Sql.statement(
        `INSERT INTO webhook_attempts (tenant_id, endpoint_id, attempted_at, delivery_id, attempt, event_type, fact_id, succeeded, status_code, duration_ms, response_snippet, error, throttled, data_subject)
         SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'),
                json_extract(value, '$[5]'), json_extract(value, '$[6]'), json_extract(value, '$[7]'), json_extract(value, '$[8]'), json_extract(value, '$[9]'),
                json_extract(value, '$[10]'), json_extract(value, '$[11]'), json_extract(value, '$[12]'), json_extract(value, '$[13]')
         FROM json_each(?) WHERE true ON CONFLICT DO NOTHING`
      , JSON.stringify(batch.attempts.map((a) => [
        a.tenant_id, a.endpoint_id, a.attempted_at, a.delivery_id, a.attempt, a.event_type, a.fact_id, a.succeeded ? 1 : 0, a.status_code, a.duration_ms, a.response_snippet, a.error,
        a.throttled ? 1 : 0, subjects.get(tenantKey(a.tenant_id, a.delivery_id)) ?? null
      ]))))
    }
    if (batch.deliveries.length > 0) {
      statements.push(Sql.statement(
        `INSERT INTO webhook_deliveries (tenant_id, delivery_id, endpoint_id, fact_id, event_type, status, attempts, last_status_code, last_attempted_at, message)
         SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'),
                json_extract(value, '$[5]'), json_extract(value, '$[6]'), json_extract(value, '$[7]'), json_extract(value, '$[8]'), json_extract(value, '$[9]')
         FROM json_each(?) WHERE true
         ON CONFLICT (tenant_id, delivery_id) DO UPDATE SET status = excluded.status, attempts = MAX(webhook_deliveries.attempts, excluded.attempts),
           last_status_code = excluded.last_status_code, last_attempted_at = excluded.last_attempted_at, message = excluded.message`
      , JSON.stringify(batch.deliveries.map((d) => [
        d.tenant_id, d.delivery_id, d.endpoint_id, d.fact_id, d.event_type, d.status, d.attempts, d.last_status_code, d.last_attempted_at, JSON.stringify(d.message)
      ]))))
    }
    const disabling: Array<string> = []
    for (const e of batch.endpoints) {
      if (e.disable !== undefined) {
        disabling.push(tenantKey(e.tenant_id, e.endpoint_id))
        statements.push(Sql.statement(
          `UPDATE webhook_endpoints SET enabled = 0, disabled_reason = ?, version = version + 1, updated_at = ?
           WHERE tenant_id = ? AND id = ? AND enabled = 1 RETURNING id`
        , e.disable, batch.now, e.tenant_id, e.endpoint_id))
      } else if (e.succeeded) {
        statements.push(Sql.statement("UPDATE webhook_endpoints SET failing_since = NULL WHERE tenant_id = ? AND id = ? AND failing_since IS NOT NULL RETURNING id", e.tenant_id, e.endpoint_id))
      } else {
        statements.push(Sql.statement("UPDATE webhook_endpoints SET failing_since = ? WHERE tenant_id = ? AND id = ? AND failing_since IS NULL RETURNING id", batch.now, e.tenant_id, e.endpoint_id))
      }
    }
    if (statements.length === 0) return new Set<string>()
    const results = yield* run(statements)
    const offset = statements.length - batch.endpoints.length
    const disabled = new Set<string>()
    batch.endpoints.forEach((e, i) => {
      // Each endpoint statement returns a row only if it changed the endpoint (disabled it, or started or ended
      // its failing period). The tenant's cached configs are dropped when the endpoint changed, or when the
      // cached view disagrees with the state just written (changed elsewhere); a batch of deliveries that
      // changes nothing — the steady state — keeps them, so the next batch reads no configs.
      const changed = (results[offset + i]?.rows.length ?? 0) > 0
      if (e.disable !== undefined && changed) disabled.add(tenantKey(e.tenant_id, e.endpoint_id))
      const cached = cache.get(e.tenant_id)?.configs.find((c) => c.id === e.endpoint_id)
      const current = e.disable === undefined && cached !== undefined && cached.enabled && (e.succeeded ? cached.failing_since === null : cached.failing_since !== null)
      if (changed || !current) cache.delete(e.tenant_id)
    })
    return disabled
  })

const configsForOf = ({ ttl, cache, key, query }: Store): Shape["configsFor"] =>
  Effect.fn("WebhookStore.configsFor")(function*(tenantIds) {
    const now = yield* Time.millis
    const missing = [...new Set(tenantIds)].filter((t) => (cache.get(t)?.at ?? -Infinity) + ttl <= now)
    if (missing.length > 0) {
      const rows = yield* query(Row, "SELECT * FROM webhook_endpoints WHERE tenant_id IN (SELECT value FROM json_each(?))", JSON.stringify(missing))
      const k = rows.length > 0 ? yield* key() : undefined
      const configs = yield* Effect.forEach(rows, (r) =>
        Effect.tryPromise({
          try: async (): Promise<EndpointConfig> => {
            const secrets = [await Secrets.open(k!, r.secret_sealed)]
            if (r.previous_secret_sealed && r.previous_secret_expires_at && Date.parse(r.previous_secret_expires_at) > now) {
              secrets.push(await Secrets.open(k!, r.previous_secret_sealed))
            }
            return { ...toEndpoint(r), tenant_id: r.tenant_id, secrets }
          },
          catch: (e) => (e instanceof Secrets.SecretsKeyError ? e : new Secrets.SecretsKeyError(String(e)))
        }))
      for (const t of missing) cache.set(t, { at: now, configs: configs.filter((c) => c.tenant_id === t) })
    }
    return new Map(tenantIds.map((t) => [t, cache.get(t)?.configs ?? []] as const))
  })

export const make = (sql: Sql.Sql, settings: Settings, catalog: Catalog): Shape => {
  const query = queryOn(sql)
  const store: Store = {
    sql,
    settings,
    catalog,
    ttl: settings.configTtlMs ?? 10_000,
    overlap: settings.rotationOverlapMs ?? 24 * 3600 * 1000,
    cap: settings.endpointsPerTenant ?? defaultEndpointsPerTenant,
    cache: new Map(),
    key: keyOf(settings),
    query,
    run: runOn(sql),
    row: rowOn(query),
    validate: (input, creating) => validate(settings, catalog, input, creating)
  }
  return {
    settings,
    invalidate: (tenantId) => void store.cache.delete(tenantId),
    create: createOf(store),
    list: listOf(store),
    get: getOf(store),
    update: updateOf(store),
    remove: removeOf(store),
    rotate: rotateOf(store),
    attempts: attemptsOf(store),
    recover: recoverOf(store),
    deliveryStates: deliveryStatesOf(store),
    record: recordOf(store),
    configsFor: configsForOf(store)
  }
}
