/** Shared test helpers: envelopes, authenticated requests, polling stored state. */
import { exports } from "cloudflare:workers"
import { env } from "cloudflare:workers"
import { Effect } from "effect"
import { FactId, Ledger, LedgerTopology, Shards, Sql, type LedgerProtocol } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import type { LedgerShard } from "@factline/workers"
import { drain } from "./Drain.js"

export const tokenA = "dev-token-tenant-a"
export const tokenB = "dev-token-tenant-b"
export const tokenAReadOnly = "dev-token-tenant-a-readonly"
/** The platform operator's token (scope `platform`, tenant `factline`): starts rebuilds, which span every tenant. */
export const tokenPlatform = "dev-token-platform"

let counter = 0
export const unique = (prefix: string) => `${prefix}_${Date.now().toString(36)}_${(counter++).toString(36)}_${Math.random().toString(36).slice(2, 8)}`

export const callCompleted = (overrides: Record<string, unknown> = {}, payload: Record<string, unknown> = {}) => {
  const call_id = (payload.call_id as string | undefined) ?? unique("call")
  return {
    schema_version: 2,
    message_type: "call.completed",
    message_id: unique("msg"),
    idempotency_key: `call.completed:${call_id}`,
    correlation_id: unique("corr"),
    tenant_id: "tenant-a",
    subject: call_id,
    source: "test",
    created_at: new Date().toISOString(),
    payload: { call_id, buyer_id: "buyer_1", duration_s: 75, price_cents: 250, currency: "EUR", ...payload },
    ...overrides
  }
}

export const request = (path: string, init: RequestInit & { token?: string | undefined } = {}) => {
  const headers = new Headers(init.headers)
  if (init.token) headers.set("authorization", `Bearer ${init.token}`)
  if (init.body && !headers.has("content-type")) headers.set("content-type", "application/json")
  return exports.default.fetch(new Request(`http://factline.test${path}`, { ...init, headers }))
}

export const postEvents = (body: unknown, token: string = tokenA) =>
  request("/v1/events", { method: "POST", body: JSON.stringify(body), token })

/** The ledger as the platform sees it (the tenants' recorded shard counts, one RPC per shard). */
/** The platform database's door over the test's D1 binding. */
export const platformDatabase = () => Sql.make("platform", env.DB)

export const ledger = () => Ledger.make(env.LEDGER, LedgerTopology.make(platformDatabase()))

/** The key of the shard holding a stream (the tenant must have appended before). */
export const shardKeyOf = async (tenant_id: string, stream: string) => {
  const shards = await Effect.runPromise(LedgerTopology.make(platformDatabase()).lookup(tenant_id))
  if (shards === undefined) throw new Error(`tenant ${tenant_id} has no ledger yet`)
  return Shards.route({ tenant_id, stream }, shards)
}

/** The LedgerShard holding a stream. */
export const shard = async (tenant_id: string, stream: string) =>
  env.LEDGER.get(env.LEDGER.idFromName(await shardKeyOf(tenant_id, stream))) as unknown as LedgerProtocol.LedgerShardRpc

export const readStream = (tenant_id: string, stream: string) => Effect.runPromise(ledger().read({ tenant_id, stream }))

/** Polls until `check` returns a value (not undefined), or fails after `timeoutMs`. */
export const eventually = async <T>(check: () => Promise<T | undefined>, timeoutMs = 20_000, label = "condition"): Promise<T> => {
  const start = Date.now()
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${label}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

/**
 * `drain()` until the tenant's shard outboxes are empty too. Facts handed over to a shard after a refused
 * relay leave on the shard's alarm, which is not a queue message: `drain()` alone does not wait for it.
 * Queues idle and every outbox empty: nothing is left to deliver.
 */
export const drainWithOutboxes = async (tenant_id: string, timeoutMs = 30_000) => {
  const topology = await Effect.runPromise(LedgerTopology.make(platformDatabase()).lookup(tenant_id))
  // Every shard the tenant has (old and new while a reshard runs).
  const shards = topology === undefined ? 0 : Shards.shardsOf(topology)
  const stubs = Array.from({ length: shards }, (_, i) => env.LEDGER.get(env.LEDGER.idFromName(Shards.shardKey(tenant_id, i))) as DurableObjectStub<LedgerShard>)
  await eventually(async () => {
    await drain({ timeoutMs })
    const sizes = await Promise.all(stubs.map((stub) => stub.outboxSize()))
    return sizes.every((n) => n === 0) ? true : undefined
  }, timeoutMs, `the outboxes of ${tenant_id} to be relayed`)
}

export const deadMessages = async (idempotencyKey: string) =>
  (await env.DB.prepare("SELECT * FROM dead_messages WHERE idempotency_key = ? ORDER BY received_at").bind(idempotencyKey).all<Record<string, any>>()).results

/** A fact as the ledger would store it, for feeding the fact consumers directly (created_at follows the sequence). */
export const storedFact = async (stream: string, sequence: number, type: string, data: Record<string, unknown>, tenant_id = "tenant-a"): Promise<Fact> => ({
  fact_id: await FactId.make({ tenantId: tenant_id, cause: `${stream}:${sequence}:${type}`, decidedBy: "test", position: 0 }),
  tenant_id,
  stream,
  sequence,
  type,
  data,
  causation_id: `${stream}:${sequence}`,
  correlation_id: stream,
  caused_by: "test",
  created_at: new Date(Date.UTC(2026, 10, 22, 0, 0, sequence)).toISOString()
})

/** A shuffled copy (Fisher–Yates); pass `random` for a reproducible order. */
export const shuffle = <T>(items: ReadonlyArray<T>, random: () => number = Math.random): Array<T> => {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}
