/**
 * Resharding a tenant whose ledger is partly tiered to R2 (cold history × reshard, issue 39 parts 1 and 3): the
 * tenant's streams on old shards 0 and 1 are wholly cold, partly cold (a cold prefix, a hot rest) or hot, some moving
 * under the new count and some staying; the tenant goes from 16 to 32 shards. Every stream must read back complete —
 * the same ids, sequences and data — from its new shard; the old shards must report nothing of the moved streams
 * (no moved fact in any old shard's walk, their cold manifest counting only the streams that stayed); a decider's
 * command on a moved stream must be judged at the stream's whole version, cold facts counted.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Effect } from "effect"
import { FactId, type LedgerProtocol, Shards } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import { eventually, ledger, request, tokenPlatform, unique } from "./helpers.js"

const old = "2020-03-01T10:00:00.000Z"
const recent = "2022-03-01T10:00:00.000Z"
/** Facts created before this are tiered: the `old` ones. */
const cutoff = "2021-01-01T00:00:00.000Z"

const stub = (tenant: string, index: number) => env.LEDGER.get(env.LEDGER.idFromName(Shards.shardKey(tenant, index))) as unknown as LedgerProtocol.LedgerShardRpc

const draft = async (tenantId: string, stream: string, n: number, createdAt: string): Promise<LedgerProtocol.FactDraft> => ({
  fact_id: await FactId.make({ tenantId, cause: `${stream}:${n}`, decidedBy: "reshard-cold-test", position: 0 }),
  type: "noted",
  data: { n, note: `über ${n}` },
  causation_id: `${stream}:${n}`,
  correlation_id: stream,
  caused_by: "reshard-cold-test",
  created_at: createdAt
})

type Kind = "cold" | "partly" | "hot"
interface Planned {
  readonly stream: string
  readonly kind: Kind
  readonly moves: boolean
  readonly from: number
}

/** For old shards 0 and 1: streams of each kind, moving (to shard i + 16 under 32) and staying. */
const plan = (): Array<Planned> => {
  const wanted: Array<[number, Kind, boolean, number]> = []
  for (const from of [0, 1]) {
    wanted.push([from, "cold", true, 2], [from, "partly", true, 2], [from, "hot", true, 1], [from, "partly", false, 2], [from, "cold", false, 1])
  }
  const out: Array<Planned> = []
  for (let i = 0; wanted.some(([, , , n]) => n > 0); i++) {
    const stream = `acct-${i}`
    const h = Shards.hash(stream)
    const slot = wanted.find(([from, , moves, n]) => n > 0 && h % 16 === from && (h % 32 !== from) === moves)
    if (slot === undefined) continue
    slot[3]--
    out.push({ stream, kind: slot[1], moves: slot[2], from: slot[0] })
  }
  return out
}

/** Every fact of the tenant's first `shards` shards, walked page by page, with the shard each was found in. */
const everyFact = async (tenant: string, shards: number) => {
  const found: Array<{ readonly fact: Fact; readonly shard: number }> = []
  for (let i = 0; i < shards; i++) {
    let after: LedgerProtocol.ShardCursor | undefined
    for (;;) {
      const page = await stub(tenant, i).readShard(after, 7)
      for (const fact of page) found.push({ fact, shard: i })
      const last = page.at(-1)
      if (page.length < 7 || !last) break
      after = { stream: last.stream, sequence: last.sequence }
    }
  }
  return found
}

const api = async (method: string, path: string, body?: unknown) => {
  const response = await request(path, { method, token: tokenPlatform, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: await response.json<any>() }
}

describe("resharding a tenant with cold history", () => {
  it("wholly and partly cold streams move complete, the old shards keep nothing of them, a decider's command gets the whole version", async () => {
    const tenantId = unique("coldrs")
    const live = ledger()
    const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
    const streams = plan()
    for (const { stream, kind } of streams) {
      const facts = await Promise.all(Array.from({ length: 8 }, (_, i) =>
        draft(tenantId, stream, i + 1, kind === "cold" || (kind === "partly" && i < 5) ? old : recent)))
      const [outcome] = await run(live.append([{ tenant_id: tenantId, stream, facts }]))
      expect(outcome!.status).toBe("appended")
    }
    // Tiered: every `old` fact of shards 0 and 1 moves to R2.
    for (const i of [0, 1]) {
      const shardKey = Shards.shardKey(tenantId, i)
      for (let call = 0; call < 10; call++) {
        const result = await stub(tenantId, i).tier(shardKey, cutoff, 50)
        if (result.tiered === 0 && result.wrapped) break
      }
    }
    const coldOf = (from: number, moves?: boolean) =>
      streams.filter((s) => s.from === from && (moves === undefined || s.moves === moves)).reduce((n, s) => n + (s.kind === "cold" ? 8 : s.kind === "partly" ? 5 : 0), 0)
    for (const i of [0, 1]) expect((await stub(tenantId, i).coldStats()).facts).toBe(coldOf(i))

    const before = new Map<string, ReadonlyArray<Fact>>()
    for (const { stream } of streams) {
      const state = await run(live.read({ tenant_id: tenantId, stream }))
      expect(state.version).toBe(8)
      expect(state.facts.map((f) => f.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
      before.set(stream, state.facts)
    }

    const started = await api("POST", `/v1/tenants/${tenantId}/ledger/reshard`, { shards: 32 })
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    const done = await eventually(async () => {
      const got = await api("GET", `/v1/tenants/${tenantId}/ledger/reshard`)
      return got.body.phase === "done" || got.body.phase === "failed" ? got.body : undefined
    }, 150_000, "the reshard to end")
    expect(done.phase, done.error).toBe("done")
    expect(done.streams_moved).toBe(streams.filter((s) => s.moves).length)

    // Every stream reads back complete from its new shard (asked directly) and through the ledger.
    for (const { stream } of streams) {
      const key = { tenant_id: tenantId, stream }
      const direct = await stub(tenantId, Shards.hash(stream) % 32).read(key)
      expect(direct.moved).toBeUndefined()
      expect(direct.version).toBe(8)
      expect(direct.facts, stream).toEqual(before.get(stream))
      expect((await run(live.read(key))).facts).toEqual(before.get(stream))
    }
    // The old shards report nothing of a moved stream: no fact in their walks, their cold manifests count only the streams that stayed.
    const moved = new Set(streams.filter((s) => s.moves).map((s) => s.stream))
    const oldShards = await everyFact(tenantId, 16)
    expect(oldShards.filter(({ fact }) => moved.has(fact.stream)).map(({ fact }) => fact.fact_id)).toEqual([])
    for (const i of [0, 1]) {
      const stats = await stub(tenantId, i).coldStats()
      expect(stats.facts).toBe(coldOf(i, false))
      expect(stats.facts).toBeLessThan(coldOf(i))
    }
    // Every fact in exactly one shard, the one its stream routes to under 32; each moved cold fact found once by id.
    const all = await everyFact(tenantId, 32)
    expect(new Set(all.map(({ fact }) => fact.fact_id)).size).toBe(all.length)
    expect(all.length).toBe(streams.length * 8)
    for (const { fact, shard } of all) expect(Shards.hash(fact.stream) % 32).toBe(shard)
    const movedCold = streams.find((s) => s.moves && s.kind === "cold")!.stream
    expect(await run(live.findFact(tenantId, before.get(movedCold)![0]!.fact_id))).toEqual(before.get(movedCold)![0])

    // A decider's command on moved streams, wholly and partly cold: judged at version 8, appended as 9.
    const movedPartly = streams.find((s) => s.moves && s.kind === "partly")!.stream
    for (const stream of [movedCold, movedPartly]) {
      const [state] = await run(live.readStreams([{ tenant_id: tenantId, stream, snapshots: [{ decider: "d", version: 1, fingerprint: "f" }], decided: [] }]))
      expect(state!.version).toBe(8)
      const next = [await draft(tenantId, stream, 9, recent)]
      const [stale] = await run(live.append([{ tenant_id: tenantId, stream, expected_version: 0, facts: next }]))
      expect(stale).toMatchObject({ status: "version_conflict", version: 8 })
      const [appended] = await run(live.append([{ tenant_id: tenantId, stream, expected_version: 8, facts: next }]))
      expect(appended).toMatchObject({ status: "appended", version: 9 })
      const read = await run(live.read({ tenant_id: tenantId, stream }))
      expect(read.facts.map((f) => f.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9])
    }
  })
})
