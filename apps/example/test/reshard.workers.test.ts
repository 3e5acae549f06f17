/**
 * Raising a tenant's ledger shard count under live traffic (core's placement/Reshard, a resumable operation of the
 * batch queue): tenant-a goes from 16 to 64 shards while a client keeps posting calls (retrying 503s) and a decider
 * keeps deciding counter bumps (each fact's `n` is the stream's previous `n` + 1, appended at an expected version).
 * Every fact stored before must be found afterwards with the same id, stream and sequence in the shard its stream
 * routes to under 64, in exactly one shard; every counter must read 1, 2, … n with no gap or repeat (a conflict lost
 * would repeat an n, one invented would be retried — and dead-lettered if never resolved); the budget projection
 * must be exact. A reshard stopped by a failing step resumes where it stopped and finishes.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { Shards } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import { drain } from "./Drain.js"
import { callCompleted, eventually, postEvents, request, tokenA, tokenPlatform, unique } from "./helpers.js"
import { platform } from "./worker.js"

const api = async (method: string, path: string, body?: unknown, token = tokenPlatform) => {
  const response = await request(path, { method, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: await response.json<any>() }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const queue = () => (env as unknown as { EVENTS_QUEUE: Queue }).EVENTS_QUEUE

const bump = (tenant_id: string, subject: string) => ({
  schema_version: 1,
  message_type: "test.counter.bump",
  message_id: unique("msg"),
  idempotency_key: unique("bump"),
  correlation_id: unique("corr"),
  tenant_id,
  subject,
  source: "test",
  created_at: new Date().toISOString(),
  payload: { by: "reshard-test" }
})

const stub = (tenant: string, index: number) => env.LEDGER.get(env.LEDGER.idFromName(Shards.shardKey(tenant, index)))

/** Every fact of the tenant's first `shards` shards, with the shard each was found in. */
const everyFact = async (tenant: string, shards: number) => {
  const found: Array<{ readonly fact: Fact; readonly shard: number }> = []
  for (let i = 0; i < shards; i++) {
    let after: { stream: string; sequence: number } | undefined
    for (;;) {
      const page = (await stub(tenant, i).readShard(after, 1_000)) as ReadonlyArray<Fact>
      for (const fact of page) found.push({ fact, shard: i })
      const last = page.at(-1)
      if (page.length < 1_000 || !last) break
      after = { stream: last.stream, sequence: last.sequence }
    }
  }
  return found
}

const budgetOf = async (buyer: string) => {
  const got = await api("GET", `/v1/projections/buyer_budgets?buyer_id=${buyer}`, undefined, tokenA)
  return got.status === 200 ? ((got.body.data[0]?.charges as number | undefined) ?? 0) : undefined
}

/** Posts until accepted: a 503 is retried, as any client does. */
const postUntilAccepted = async (events: ReadonlyArray<unknown>) => {
  for (let attempt = 0; attempt < 200; attempt++) {
    const response = await postEvents({ events }, tokenA)
    if (response.status === 202) return
    expect(response.status, await response.text()).toBe(503)
    await sleep(200)
  }
  throw new Error("the events were never accepted")
}

const follow = (tenant: string) =>
  eventually(async () => {
    const got = await api("GET", `/v1/tenants/${tenant}/ledger/reshard`)
    if (got.body.phase === "failed") return got.body
    return got.body.phase === "done" ? got.body : undefined
  }, 150_000, "the reshard to end")

/** A counter stream's `n`s in sequence order, each fact's sequence checked against its position. */
const counter = (facts: ReadonlyArray<Fact>, stream: string) =>
  facts.filter((f) => f.stream === stream).sort((a, b) => a.sequence - b.sequence).map((f, i) => {
    expect(f.sequence).toBe(i + 1)
    return (f.data as { n: number }).n
  })

describe("resharding a tenant's ledger", () => {
  it("refuses what cannot be resharded with clear answers", async () => {
    await postUntilAccepted([callCompleted({}, { buyer_id: unique("buyer") })])
    await drain()
    for (const [body, status] of [[{ shards: 16 }, 400], [{ shards: 8 }, 400], [{ shards: 24 }, 400], [{ shards: 4096 }, 400], [{ shards: 32.5 }, 400], [{}, 400], [{ shards: "64" }, 400]] as const) {
      const got = await api("POST", "/v1/tenants/tenant-a/ledger/reshard", body)
      expect(got.status, JSON.stringify(body)).toBe(status)
      expect(got.body.error.code).toBe("invalid_request")
    }
    expect((await api("POST", "/v1/tenants/never-seen/ledger/reshard", { shards: 32 })).status).toBe(404)
    expect((await api("POST", "/v1/tenants/tenant-a/ledger/reshard", { shards: 32 }, tokenA)).status).toBe(403)
    expect((await api("GET", "/v1/tenants/tenant-a/ledger/reshard")).status).toBe(404)
  })

  it("tenant-a goes from 16 to 64 shards under a writer and a decider: every fact kept with its id and order, counters exact, budget exact", async () => {
    const buyer = unique("buyer")
    const counters = Array.from({ length: 12 }, () => unique("ctr"))
    const bumps = new Map(counters.map((c) => [c, 0]))
    let calls = 0
    for (let i = 0; i < 4; i++) {
      await postUntilAccepted(Array.from({ length: 10 }, () => callCompleted({}, { buyer_id: buyer })))
      calls += 10
    }
    for (const c of counters) {
      for (let i = 0; i < 3; i++) await queue().send(bump("tenant-a", c), { contentType: "json" })
      bumps.set(c, 3)
    }
    await drain()
    await eventually(async () => ((await budgetOf(buyer)) === calls ? true : undefined), 30_000, "the budget before")
    const before = await everyFact("tenant-a", 16)
    expect(before.length).toBeGreaterThan(70)

    const started = await api("POST", "/v1/tenants/tenant-a/ledger/reshard", { shards: 64 })
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    expect(started.body).toMatchObject({ tenant_id: "tenant-a", from_shards: 16, to_shards: 64, phase: "running" })
    // The same count again answers the running reshard; another count is a conflict while it runs.
    expect((await api("POST", "/v1/tenants/tenant-a/ledger/reshard", { shards: 64 })).body.reshard_id).toBe(started.body.reshard_id)
    expect((await api("POST", "/v1/tenants/tenant-a/ledger/reshard", { shards: 128 })).status).toBe(409)

    let running = true
    const writer = (async () => {
      while (running) {
        await postUntilAccepted(Array.from({ length: 5 }, () => callCompleted({}, { buyer_id: buyer })))
        calls += 5
        await sleep(100)
      }
    })()
    const decider = (async () => {
      while (running) {
        for (const c of counters.slice(0, 6)) {
          await queue().send(bump("tenant-a", c), { contentType: "json" })
          bumps.set(c, bumps.get(c)! + 1)
        }
        await sleep(150)
      }
    })()
    const done = await follow("tenant-a")
    running = false
    await Promise.all([writer, decider])
    expect(done.phase, done.error).toBe("done")
    await drain()

    const tenant = await env.DB.prepare("SELECT shard_count, resharding_to, shards_switched FROM ledger_tenants WHERE tenant_id = 'tenant-a'").first()
    expect(tenant).toEqual({ shard_count: 64, resharding_to: null, shards_switched: 0 })
    expect(done).toMatchObject({ shards_done: 16, stage: "drop" })
    expect(done.streams_moved).toBeGreaterThan(0)

    const after = await everyFact("tenant-a", 64)
    // Each fact in exactly one shard: the one its stream routes to under 64.
    const byId = new Map(after.map((f) => [f.fact.fact_id, f]))
    expect(byId.size).toBe(after.length)
    for (const { fact, shard } of after) expect(Shards.hash(fact.stream) % 64).toBe(shard)
    // Every fact from before, with the same stream and sequence.
    for (const { fact } of before) {
      const now = byId.get(fact.fact_id)
      expect(now?.fact, fact.fact_id).toEqual(fact)
    }
    // Counters decided during the switch: 1, 2, … n, each appended once at the right version.
    await eventually(async () => {
      const facts = (await everyFact("tenant-a", 64)).map((f) => f.fact)
      return counters.every((c) => counter(facts, c).length === bumps.get(c)) ? true : undefined
    }, 60_000, "every bump decided")
    const facts = (await everyFact("tenant-a", 64)).map((f) => f.fact)
    for (const c of counters) expect(counter(facts, c)).toEqual(Array.from({ length: bumps.get(c)! }, (_, i) => i + 1))
    await eventually(async () => ((await budgetOf(buyer)) === calls ? true : undefined), 30_000, `the budget after (${calls} calls)`)
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM dead_messages WHERE tenant_id = 'tenant-a'").first<{ n: number }>())!.n).toBe(0)
  })

  it("a reshard stopped by a failing step ends failed, releases its hold, and resumes where it stopped when asked again", async () => {
    const counters = Array.from({ length: 20 }, () => unique("ctr"))
    for (const c of counters) await queue().send(bump("tenant-c", c), { contentType: "json" })
    await drain()
    const before = await everyFact("tenant-c", 16)
    expect(before.length).toBe(20)
    // The fault: shard 2 already holds for another reshard, so holding it fails on every attempt.
    await stub("tenant-c", 2).reshardHold(2, 16, 128)
    const started = await api("POST", "/v1/tenants/tenant-c/ledger/reshard", { shards: 32 })
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    const failed = await follow("tenant-c")
    expect(failed).toMatchObject({ phase: "failed", shard: 2, stage: "hold" })
    expect(failed.error).toContain("already in a reshard")
    // Shards 0 and 1 are switched: their streams route by 32 already; the rest by 16.
    expect(await env.DB.prepare("SELECT shard_count, resharding_to, shards_switched FROM ledger_tenants WHERE tenant_id = 'tenant-c'").first())
      .toEqual({ shard_count: 16, resharding_to: 32, shards_switched: 2 })
    // Another count cannot start over a reshard stopped part-way.
    expect((await api("POST", "/v1/tenants/tenant-c/ledger/reshard", { shards: 64 })).status).toBe(409)
    // Decided meanwhile: a bump of each counter, whichever shard answers it.
    for (const c of counters) await queue().send(bump("tenant-c", c), { contentType: "json" })
    await drain()

    const resumed = await api("POST", "/v1/tenants/tenant-c/ledger/reshard", { shards: 32 })
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(202)
    expect(resumed.body).toMatchObject({ shard: 2, stage: "hold" })
    expect(resumed.body.reshard_id).not.toBe(started.body.reshard_id)
    const done = await follow("tenant-c")
    expect(done.phase, done.error).toBe("done")
    for (const c of counters) await queue().send(bump("tenant-c", c), { contentType: "json" })
    await drain()
    const facts = await everyFact("tenant-c", 32)
    for (const { fact, shard } of facts) expect(Shards.hash(fact.stream) % 32).toBe(shard)
    const byId = new Map(facts.map((f) => [f.fact.fact_id, f.fact]))
    for (const { fact } of before) expect(byId.get(fact.fact_id)).toEqual(fact)
    for (const c of counters) expect(counter(facts.map((f) => f.fact), c)).toEqual([1, 2, 3])
  })

  it("a reshard whose step message was lost is sent its step again when asked after it stalled; the lost step turning up later changes nothing", async () => {
    const tenant = unique("tenant-lost")
    const counters = Array.from({ length: 10 }, () => unique("ctr"))
    for (const c of counters) await queue().send(bump(tenant, c), { contentType: "json" })
    await drain()
    const before = await everyFact(tenant, 16)
    expect(before.length).toBe(10)
    // The start's step message is lost: the route runs over a batch queue that drops what it is sent.
    const dropped: Array<unknown> = []
    const lossy = { send: async (body: unknown) => void dropped.push(body), sendBatch: async (messages: Iterable<MessageSendRequest>) => void dropped.push(...[...messages].map((m) => m.body)) }
    const started = await platform.fetch(
      new Request(`http://factline.test/v1/tenants/${tenant}/ledger/reshard`, {
        method: "POST", body: JSON.stringify({ shards: 32 }), headers: { authorization: `Bearer ${tokenPlatform}`, "content-type": "application/json" }
      }),
      { ...env, BATCH_QUEUE: lossy } as never,
      { waitUntil: () => undefined, passThroughOnException: () => undefined } as never
    )
    expect(started.status).toBe(202)
    expect(dropped).toHaveLength(1)
    const id = (await started.json<any>()).reshard_id as string
    await sleep(1_000)
    expect((await api("GET", `/v1/tenants/${tenant}/ledger/reshard`)).body).toMatchObject({ phase: "running", shard: 0, stage: "hold" })
    // Asked again before it looks stalled: the running reshard, nothing sent.
    expect((await api("POST", `/v1/tenants/${tenant}/ledger/reshard`, { shards: 32 })).body).toMatchObject({ reshard_id: id, phase: "running", shard: 0, stage: "hold" })
    await sleep(1_000)
    expect((await api("GET", `/v1/tenants/${tenant}/ledger/reshard`)).body).toMatchObject({ shard: 0, stage: "hold" })
    // Its record unmoved for longer than the bound (as if minutes had passed): asked again, its step is sent again.
    await env.DB.prepare("UPDATE ledger_reshards SET updated_at = ? WHERE id = ?").bind(new Date(Date.now() - 3 * 60_000).toISOString(), id).run()
    expect((await api("POST", `/v1/tenants/${tenant}/ledger/reshard`, { shards: 32 })).status).toBe(202)
    const done = await follow(tenant)
    expect(done.phase, done.error).toBe("done")
    expect(done.reshard_id).toBe(id)
    // The lost message turning up after all: a step of a finished reshard does nothing.
    await (env as unknown as { BATCH_QUEUE: Queue }).BATCH_QUEUE.send(dropped[0], { contentType: "json" })
    await drain()
    expect((await api("GET", `/v1/tenants/${tenant}/ledger/reshard`)).body).toEqual(done)
    const facts = await everyFact(tenant, 32)
    expect(facts).toHaveLength(10)
    for (const { fact, shard } of facts) expect(Shards.hash(fact.stream) % 32).toBe(shard)
    const byId = new Map(facts.map((f) => [f.fact.fact_id, f.fact]))
    for (const { fact } of before) expect(byId.get(fact.fact_id)).toEqual(fact)
    expect(done.facts_copied).toBe(before.filter(({ fact }) => Shards.hash(fact.stream) % 32 !== Shards.hash(fact.stream) % 16).length)
  })
})
