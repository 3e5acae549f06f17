/**
 * Decider snapshots (Handler.Snapshot) on the in-memory platform: the real ledger SQL (LedgerStorage over
 * node:sqlite), the real dispatch. A decider folding from its snapshot decides what the full fold decides and
 * reads fewer facts; a snapshot of another version, or one that does not decode, is never used; a redelivered
 * message whose decision a snapshot covers decides nothing new; the registry refuses a snapshot on a decider
 * folding personal data; the kit's check fails on an evolve changed without a new snapshot version.
 */
import { Effect, Result, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Handler from "../definitions/Handler.js"
import * as MessageDefinition from "../definitions/MessageDefinition.js"
import * as Module from "../definitions/Module.js"
import * as Registry from "../registry/Registry.js"
import { message } from "../testing/Builders.js"
import { memoryDurableStorage } from "../testing/MemoryBindings.js"
import { DeciderSpec, readStream } from "../testing/Specs.js"
import * as TestPlatform from "../testing/TestPlatform.js"
import * as LedgerStorage from "../ledger/LedgerStorage.js"
import * as Consumer from "../consuming/Consumer.js"
import { dispatch } from "./Dispatch.js"

const Deposit = MessageDefinition.command("account.deposit").version(1, Schema.Struct({ cents: Schema.Int }))
const Deposited = FactDefinition.make("deposited", Schema.Struct({ cents: Schema.Int, balance: Schema.Int }))
const State = Schema.Struct({ balance: Schema.Int, count: Schema.Int })

const account = (options: { readonly version?: number; readonly every?: number; readonly snapshot?: boolean; readonly evolve?: (s: typeof State.Type, cents: number) => typeof State.Type } = {}) =>
  Handler.decider(Deposit, {
    name: "deposit",
    emits: [Deposited],
    initialState: { balance: 0, count: 0 },
    evolve: (s, f) => (options.evolve ?? ((st, cents) => ({ balance: st.balance + cents, count: st.count + 1 })))(s, f.data.cents),
    // The decision carries what the state says: a wrong state decides wrong facts.
    decide: (m, s) => Effect.succeed([Deposited.make({ cents: m.payload.cents, balance: s.balance + m.payload.cents + s.count * 0 })]),
    ...(options.snapshot === false ? {} : { snapshot: { schema: State, version: options.version ?? 1, every: options.every ?? 10 } })
  })

const tenant = "tenant-snap"
const subject = "acct-1"

/** Deposits `cents` one message each (keys `prefix-i`), through the real dispatch; returns the shard's facts read per decision. */
const deposit = async (platform: TestPlatform.TestPlatform, amounts: ReadonlyArray<number>, prefix = "m") => {
  for (const [i, cents] of amounts.entries()) {
    const msg = message(Deposit, { cents }, { subject, tenant, idempotencyKey: `${prefix}-${i}` })
    const routed = platform.registry.route(msg, msg.payload)
    if (Result.isFailure(routed)) throw new Error("not routed")
    const outcomes = await platform.run(dispatch([{ key: "k", value: routed.success }]))
    expect(outcomes.get("k")).toEqual(Consumer.done)
  }
}

const platformOf = (decider: Handler.Decider<any, any, any, any, any>) => TestPlatform.make([Module.make("accounts", { handlers: [decider] })], { shardsPerTenant: 1 })
const shardOf = (platform: TestPlatform.TestPlatform) => [...platform.ledger.shards.values()][0]!.storage
const snapshotRead = (decider: Handler.Decider<any, any, any, any, any>) => ({ tenant_id: tenant, stream: subject, snapshots: [{ decider: decider.name, version: decider.snapshot!.version, fingerprint: decider.snapshot!.fingerprint }] })
const balances = async (platform: TestPlatform.TestPlatform) => (await readStream(platform, tenant, subject)).facts.map((f) => (f.data as { balance: number }).balance)

describe("decider snapshots", () => {
  it("the ledger stores a snapshot only with an append at its sequence, and answers it with the facts after it", () => {
    const ledger = LedgerStorage.make(memoryDurableStorage())
    const key = { tenant_id: tenant, stream: subject }
    const draft = (n: number) => ({ fact_id: `f${n}`, type: "deposited", data: { cents: 1, balance: n }, causation_id: `c${n}`, correlation_id: "c", caused_by: "deposit", created_at: "2026-01-01T00:00:00.000Z" })
    const snapshot = (sequence: number, version = 1) => ({ decider: "deposit", version, fingerprint: "fp", sequence, state: JSON.stringify({ balance: sequence, count: sequence }) })
    expect(ledger.append({ ...key, expected_version: 0, facts: [draft(1), draft(2)], snapshot: snapshot(2) }).status).toBe("appended")
    // A version conflict writes nothing, the snapshot neither.
    expect(ledger.append({ ...key, expected_version: 0, facts: [draft(9)], snapshot: snapshot(1) }).status).toBe("version_conflict")
    expect(ledger.append({ ...key, expected_version: 2, facts: [draft(3)] }).status).toBe("appended")
    const read = ledger.readStream({ ...key, snapshots: [{ decider: "deposit", version: 1, fingerprint: "fp" }], decided: ["f1"] })
    expect(read).toMatchObject({ version: 3, after: 2, snapshots: [{ sequence: 2, state: "{\"balance\":2,\"count\":2}" }] })
    expect(read.facts.map((f) => f.sequence)).toEqual([3])
    // The decision opened by f1 lies under the snapshot: answered apart, whole (its run of the same cause).
    expect(read.earlier?.map((f) => f.fact_id)).toEqual(["f1"])
    // Another version or fingerprint: no snapshot, every fact.
    for (const asked of [{ decider: "deposit", version: 2, fingerprint: "fp" }, { decider: "deposit", version: 1, fingerprint: "other" }]) {
      const other = ledger.readStream({ ...key, snapshots: [asked] })
      expect([other.snapshots, other.after, other.facts.length]).toEqual([[], 0, 3])
    }
    // Writing version 2 drops version 1's row.
    expect(ledger.append({ ...key, expected_version: 3, facts: [draft(4)], snapshot: snapshot(4, 2) }).status).toBe("appended")
    expect(ledger.readStream({ ...key, snapshots: [{ decider: "deposit", version: 1, fingerprint: "fp" }] }).snapshots).toEqual([])
  })

  it("a read answers a covered decision whole (its run of facts of one cause), and none when its first fact lies after the snapshot", () => {
    const ledger = LedgerStorage.make(memoryDurableStorage())
    const key = { tenant_id: tenant, stream: subject }
    const draft = (id: string, cause: string) => ({ fact_id: id, type: "deposited", data: { cents: 1, balance: 1 }, causation_id: cause, correlation_id: "c", caused_by: "deposit", created_at: "2026-01-01T00:00:00.000Z" })
    ledger.append({ ...key, facts: [draft("a1", "ca"), draft("a2", "ca")] })
    ledger.append({ ...key, facts: [draft("b1", "cb")], snapshot: { decider: "deposit", version: 1, fingerprint: "fp", sequence: 3, state: "{}" } })
    ledger.append({ ...key, facts: [draft("c1", "cc")] })
    const read = ledger.readStream({ ...key, snapshots: [{ decider: "deposit", version: 1, fingerprint: "fp" }], decided: ["a1", "c1", "unknown"] })
    expect([read.after, read.facts.map((f) => f.fact_id), read.earlier?.map((f) => f.fact_id)]).toEqual([3, ["c1"], ["a1", "a2"]])
  })

  it("a decider folding from its snapshot decides what the full fold decides, reading only the facts after it", async () => {
    const amounts = Array.from({ length: 35 }, (_, i) => (i % 7) + 1)
    const withSnapshot = platformOf(account({ every: 10 }))
    const without = platformOf(account({ snapshot: false }))
    await deposit(withSnapshot, amounts)
    await deposit(without, amounts)
    expect(await balances(withSnapshot)).toEqual(await balances(without))
    const read = shardOf(withSnapshot).readStream(snapshotRead(account({ every: 10 })))
    expect(read.snapshots?.[0]?.sequence).toBeGreaterThanOrEqual(30)
    expect(read.facts.length).toBeLessThan(10)
    expect(JSON.parse(read.snapshots![0]!.state)).toEqual({ balance: amounts.slice(0, read.snapshots![0]!.sequence).reduce((a, b) => a + b, 0), count: read.snapshots![0]!.sequence })
  })

  it("a snapshot of another version is never used: the new evolve folds the whole stream", async () => {
    // New code: evolve doubles each deposit, snapshot version 2. The shard still holds a version-1 snapshot (here
    // one saying 1000): were it used, the balance would start from it.
    const doubled = account({ every: 50, version: 2, evolve: (s, cents) => ({ balance: s.balance + 2 * cents, count: s.count + 1 }) })
    const platform = platformOf(doubled)
    await deposit(platform, [1, 1, 1])
    const old = account({ version: 1 }).snapshot!
    const shard = shardOf(platform)
    expect(shard.append({ tenant_id: tenant, stream: subject, expected_version: 3, facts: [], snapshot: { decider: "deposit", version: 1, fingerprint: old.fingerprint, sequence: 3, state: "{\"balance\":1000,\"count\":3}" } }).status).toBe("appended")
    expect(shard.readStream(snapshotRead(account({ version: 1 }))).snapshots?.length).toBe(1)
    await deposit(platform, [1], "later")
    // Balances decided: 0+1, 2+1, 4+1, then 6+1 folded from the facts (each deposit counted twice by the new evolve).
    expect(await balances(platform)).toEqual([1, 3, 5, 7])
    expect(shard.readStream(snapshotRead(doubled)).snapshots).toEqual([])
  })

  it("a snapshot that does not decode is ignored: the decision folds the whole stream", async () => {
    const decider = account({ every: 3 })
    const platform = platformOf(decider)
    await deposit(platform, [1, 2, 3])
    const shard = shardOf(platform)
    // Corrupt the stored state (a field of the wrong type): it must not be trusted.
    const { sequence } = shard.readStream(snapshotRead(decider)).snapshots![0]!
    expect(shard.append({ tenant_id: tenant, stream: subject, expected_version: 3, facts: [], snapshot: { decider: "deposit", version: 1, fingerprint: decider.snapshot!.fingerprint, sequence: 3, state: "{\"balance\":\"x\"}" } }).status).toBe("appended")
    expect(sequence).toBe(3)
    expect(shard.readStream(snapshotRead(decider)).snapshots?.[0]?.state).toBe("{\"balance\":\"x\"}")
    await deposit(platform, [4], "later")
    expect((await balances(platform)).at(-1)).toBe(10)
    // That decision folded the whole stream and replaced the bad snapshot with its own.
    expect(shard.readStream(snapshotRead(decider)).snapshots?.map((x) => [x.sequence, JSON.parse(x.state)])).toEqual([[4, { balance: 10, count: 4 }]])
  })

  it("a redelivered message whose decision a snapshot covers decides nothing new", async () => {
    const platform = platformOf(account({ every: 2 }))
    await deposit(platform, [5, 6, 7, 8])
    expect(shardOf(platform).readStream(snapshotRead(account({ every: 2 }))).after).toBe(4)
    await deposit(platform, [5])
    expect(await balances(platform)).toEqual([5, 11, 18, 26])
  })

  it("the registry refuses a snapshot on a decider that folds personal data", () => {
    const Noted = FactDefinition.make("noted", Schema.Struct({ buyer_id: Schema.String, phone: Schema.String })).personal({ subject: "buyer_id", fields: ["phone"] })
    const noting = Handler.decider(Deposit, {
      name: "noting", emits: [Deposited], reads: [Noted], initialState: 0, evolve: (n) => n + 1,
      decide: () => Effect.succeed([]), snapshot: { schema: Schema.Int, version: 1 }
    })
    expect(() => Registry.make([Module.make("notes", { handlers: [noting] })], { requireEmitters: false })).toThrow(
      /decider "noting" \(module notes\) declares a snapshot but folds fact type\(s\) "noted" with personal data/
    )
  })

  it("the kit's check fails when evolve changed under the same snapshot version, and passes once it is raised", () => {
    const history = [1, 2, 3, 4].map((cents, i) => Deposited.make({ cents, balance: i }))
    DeciderSpec.checkSnapshot(account(), { history, recorded: { 1: { balance: 3, count: 2 } } })
    const changed = account({ evolve: (s, cents) => ({ balance: s.balance + cents * 100, count: s.count + 1 }) })
    expect(() => DeciderSpec.checkSnapshot(changed, { history, recorded: { 1: { balance: 3, count: 2 } } })).toThrow(/decider deposit: .*Raise snapshot\.version \(to 2\)/)
    const raised = account({ version: 2, evolve: (s, cents) => ({ balance: s.balance + cents * 100, count: s.count + 1 }) })
    expect(() => DeciderSpec.checkSnapshot(raised, { history, recorded: { 1: { balance: 3, count: 2 } } })).toThrow(/no recorded snapshot for snapshot.version 2: add 2: \{"balance":300,"count":2\}/)
    DeciderSpec.checkSnapshot(raised, { history, recorded: { 1: { balance: 3, count: 2 }, 2: { balance: 300, count: 2 } } })
  })
})
