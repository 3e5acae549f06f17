/**
 * Resharding under faults (issue 39, `npm run chaos`): tenant-a goes from 16 to 64 ledger shards while a client
 * keeps posting calls (its POSTs retried, same idempotency keys, as a producer does) and a decider keeps deciding
 * counter bumps (each fact's `n` is the stream's previous `n` + 1, appended at an expected version), and faults are
 * injected: the test Worker's handlers — the batch queue's reshard steps, the event consumers, the HTTP routes — run
 * on a platform and read databases refusing their first calls and then a share of them, or losing the reply of a call
 * that went through (HandlerFaults.ts), drawn by a seeded generator; and the tenant's shard objects, old and new,
 * are evicted at random every 200 ms (`evictDurableObject`: their in-memory state — a hold's cached state, the
 * topology they learnt — gone, their storage kept). A reshard step failing on its last attempt ends the reshard
 * `failed`; it is resumed by asking again for the count, as operating.md says.
 *
 * Checked once it is done (faults lifted, queues drained): every fact stored before is found with the same id,
 * stream, sequence and body, in exactly one shard — the one its stream routes to under 64; every accepted call's 3
 * facts once in the ledger and once in the facts copy (0 lost, 0 doubled); every counter reads 1, 2, … n (a
 * version conflict lost would repeat an n; one invented is retried, and dead-lettered if it never resolves); the
 * buyer's budget exact; no dead letter.
 *
 * Prints a `SCORECARD` line and asserts `passed`.
 */
import { evictDurableObject } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { afterAll, describe, expect, it } from "vitest"
import { Shards } from "@factline/core/runtime"
import type { Fact } from "@factline/schemas"
import { drain } from "../Drain.js"
import * as HandlerFaults from "../HandlerFaults.js"
import { callCompleted, eventually, postEvents, request, tokenA, tokenPlatform, unique } from "../helpers.js"

const tenant = "tenant-a"
const score = (fields: Record<string, unknown>) => console.log(`SCORECARD ${JSON.stringify(fields)}`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const from = Shards.defaultShardsPerTenant
const to = 64

const api = async (method: string, path: string, body?: unknown, token = tokenPlatform) => {
  const response = await request(path, { method, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.status, body: await response.json<any>().catch(() => null) }
}

const run = unique("rsx")
const buyer = `${run}_buyer`
const call = (i: number) => callCompleted({}, { call_id: `${run}_c${i}`, buyer_id: buyer, duration_s: 90, price_cents: 100 })
/** A call makes 3 facts in its stream (outcome, qualification, charge: 90 s qualifies). */
const factsPerCall = 3

const bump = (subject: string) => ({
  schema_version: 1, message_type: "test.counter.bump", message_id: unique("msg"), idempotency_key: unique("bump"), correlation_id: unique("corr"),
  tenant_id: tenant, subject, source: "test", created_at: new Date().toISOString(), payload: { by: "reshard-chaos" }
})
const queue = () => (env as unknown as { EVENTS_QUEUE: Queue }).EVENTS_QUEUE

/** POSTs events until they are accepted (a 202), as a producer retries; how many tries it took. */
const postUntilAccepted = async (events: ReadonlyArray<unknown>) => {
  let last = ""
  for (let tries = 1; tries <= 100; tries++) {
    const response = await postEvents({ events }, tokenA)
    if (response.status === 202) return tries
    last = `${response.status} ${(await response.text()).slice(0, 300)}`
    await sleep(150)
  }
  throw new Error(`the events were never accepted: ${last}`)
}

const stub = (index: number) => env.LEDGER.get(env.LEDGER.idFromName(Shards.shardKey(tenant, index)))

/** Every fact of the tenant's first `count` shards, with the shard each was found in. */
const everyFact = async (count: number) => {
  const found: Array<{ readonly fact: Fact; readonly shard: number }> = []
  for (let i = 0; i < count; i++) {
    let after: { stream: string; sequence: number } | undefined
    for (;;) {
      const page = (await stub(i).readShard(after, 1_000)) as ReadonlyArray<Fact>
      for (const fact of page) found.push({ fact, shard: i })
      const last = page.at(-1)
      if (page.length < 1_000 || !last) break
      after = { stream: last.stream, sequence: last.sequence }
    }
  }
  return found
}

/** A counter stream's `n`s in sequence order; `null` where a sequence is out of place. */
const counter = (facts: ReadonlyArray<Fact>, stream: string) =>
  facts.filter((f) => f.stream === stream).sort((a, b) => a.sequence - b.sequence).map((f, i) => (f.sequence === i + 1 ? (f.data as { n: number }).n : null))

const budgetOf = async () => {
  const got = await api("GET", `/v1/projections/buyer_budgets?buyer_id=${buyer}`, undefined, tokenA)
  return got.status === 200 ? ((got.body.data[0]?.charges as number | undefined) ?? 0) : undefined
}

afterAll(() => HandlerFaults.uninstall())

describe("chaos: resharding under faults", () => {
  it("tenant-a from 16 to 64 shards under a writer and a decider while D1 refuses and loses replies and shards are evicted: 0 lost, 0 doubled, counters exact", async () => {
    const counters = Array.from({ length: 24 }, () => unique("ctr"))
    const bumps = new Map(counters.map((c) => [c, 0]))
    const calls: Array<ReturnType<typeof call>> = []
    for (let i = 0; i < 8; i++) {
      const events = Array.from({ length: 10 }, (_, k) => call(i * 10 + k))
      calls.push(...events)
      await postUntilAccepted(events)
    }
    for (const c of counters) {
      for (let i = 0; i < 3; i++) await queue().send(bump(c), { contentType: "json" })
      bumps.set(c, 3)
    }
    await drain({ timeoutMs: 120_000 })
    const before = await everyFact(from)

    // The faults: the Worker's databases refusing and losing replies, in every handler (the reshard's steps included).
    const faults = HandlerFaults.install({ d1: { first: 4, rate: 0.06 }, r2: { first: 0, rate: 0 }, keyStore: { first: 0, rate: 0 }, seed: 39 })

    let reshardPosts = 0
    const ask = async () => {
      for (;;) {
        reshardPosts++
        const got = await api("POST", `/v1/tenants/${tenant}/ledger/reshard`, { shards: to })
        if (got.status === 202) return got.body
        if (reshardPosts > 100) throw new Error(`the reshard was never started: ${got.status} ${JSON.stringify(got.body)}`)
        await sleep(150)
      }
    }
    const started = await ask()
    expect(started).toMatchObject({ tenant_id: tenant, from_shards: from, to_shards: to })

    let running = true
    let postTries = 0
    let callIndex = 1_000
    const writer = (async () => {
      while (running) {
        const events = Array.from({ length: 3 }, () => call(callIndex++))
        calls.push(...events)
        postTries += await postUntilAccepted(events)
        await sleep(300)
      }
    })()
    const decider = (async () => {
      while (running) {
        for (const c of counters.slice(0, 12)) {
          await queue().send(bump(c), { contentType: "json" })
          bumps.set(c, bumps.get(c)! + 1)
        }
        await sleep(400)
      }
    })()

    let evictions = 0
    let evictionsRefused = 0
    const draw = (() => {
      let seed = 39
      return () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % 1_000_000) / 1_000_000
    })()
    const evictor = (async () => {
      while (running) {
        const shard = Math.floor(draw() * to)
        await evictDurableObject(stub(shard)).then(() => evictions++, () => evictionsRefused++)
        await sleep(200)
      }
    })()

    // Followed to its end; a failed reshard is resumed, as an operator would.
    const stages = new Set<string>()
    const failures: Array<string> = []
    const done = await eventually(async () => {
      const got = await api("GET", `/v1/tenants/${tenant}/ledger/reshard`)
      if (got.status !== 200) return undefined
      stages.add(`${got.body.shard}:${got.body.stage}`)
      if (got.body.phase === "failed") {
        failures.push(`shard ${got.body.shard} ${got.body.stage}: ${got.body.error}`)
        await ask()
        return undefined
      }
      return got.body.phase === "done" ? got.body : undefined
    }, 400_000, "the reshard to end done")
    running = false
    await Promise.all([writer, decider, evictor])
    HandlerFaults.uninstall()
    await drain({ timeoutMs: 180_000 })

    const topology = await env.DB.prepare("SELECT shard_count, resharding_to, shards_switched FROM ledger_tenants WHERE tenant_id = ?").bind(tenant).first()
    const after = await everyFact(to)
    const byId = new Map(after.map((f) => [f.fact.fact_id, f]))
    const inTwoShards = after.length - byId.size
    const misplaced = after.filter(({ fact, shard }) => Shards.hash(fact.stream) % to !== shard).length
    const beforeChanged = before.filter(({ fact }) => JSON.stringify(byId.get(fact.fact_id)?.fact) !== JSON.stringify(fact)).length

    // Every accepted call: its 3 facts once in the ledger and once in the facts copy.
    const callStreams = new Set(calls.map((e) => e.subject))
    const callFacts = after.filter(({ fact }) => callStreams.has(fact.stream))
    const expected = calls.length * factsPerCall
    const distinct = new Set(callFacts.map(({ fact }) => fact.fact_id)).size
    const lost = Math.max(0, expected - distinct)
    const doubled = callFacts.length - distinct + inTwoShards
    const copy = (await env.DB.prepare("SELECT COUNT(*) AS n, COUNT(DISTINCT fact_id) AS distinct_ids FROM facts WHERE tenant_id = ? AND stream IN (SELECT value FROM json_each(?))")
      .bind(tenant, JSON.stringify([...callStreams])).first<{ n: number; distinct_ids: number }>())!

    // Counters: 1 … n, each decided once at the right version.
    const facts = after.map((f) => f.fact)
    const countersWrong = counters.filter((c) => JSON.stringify(counter(facts, c)) !== JSON.stringify(Array.from({ length: bumps.get(c)! }, (_, i) => i + 1)))
    const budget = await eventually(async () => ((await budgetOf()) === calls.length ? calls.length : undefined), 60_000, "the budget").catch(async () => budgetOf())
    const deadLetters = (await env.DB.prepare("SELECT COUNT(*) AS n FROM dead_messages WHERE tenant_id = ?").bind(tenant).first<{ n: number }>())!.n
    const injected = faults.d1.refused + faults.d1.lostReplies + evictions

    const passed = done.phase === "done" && lost === 0 && doubled === 0 && beforeChanged === 0 && misplaced === 0 && countersWrong.length === 0 &&
      copy.n === expected && copy.distinct_ids === expected && budget === calls.length && deadLetters === 0 && faults.d1.refused > 0 && evictions > 0
    score({
      case: "reshard 16 → 64 under faults", passed, messages_sent: calls.length + [...bumps.values()].reduce((a, b) => a + b, 0),
      facts_expected: expected, facts_found: distinct, duplicates_found: doubled, messages_lost: lost, dlq_expected: 0, dlq_found: deadLetters,
      facts_before: before.length, facts_before_changed: beforeChanged, facts_after: after.length, misplaced, in_two_shards: inTwoShards, facts_copy: copy,
      counters: counters.length, counter_bumps: [...bumps.values()].reduce((a, b) => a + b, 0), counters_wrong: countersWrong.length, budget, topology,
      streams_moved: done.streams_moved, facts_copied: done.facts_copied, rows_carried: done.rows_carried, failures, resumed: failures.length,
      stages_seen: stages.size, reshard_posts: reshardPosts, event_posts: postTries, faults, evictions, evictions_refused: evictionsRefused, faults_injected: injected
    })
    expect(topology).toEqual({ shard_count: to, resharding_to: null, shards_switched: 0 })
    expect({ lost, doubled, beforeChanged, misplaced, countersWrong, deadLetters }).toEqual({ lost: 0, doubled: 0, beforeChanged: 0, misplaced: 0, countersWrong: [], deadLetters: 0 })
    expect(copy).toEqual({ n: expected, distinct_ids: expected })
    expect(budget).toBe(calls.length)
    expect(passed).toBe(true)
  }, 600_000)
})
