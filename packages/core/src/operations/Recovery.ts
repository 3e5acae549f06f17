/**
 * Recovery after the queues lost messages — what `wrangler dev` does on a restart (its local queues keep
 * nothing; the ledger and D1 do, docs/reliability.md): `factline recover --since 10m`.
 *
 * - **Facts.** Every fact appended since `since` is relayed again to the destinations the registry gives its
 *   type (fact-processing, projections, webhooks), found by walking every ledger shard (all tenants, from
 *   `ledger_shards`) a window at a time (`readShardSince`: bounded work per call whatever a shard holds).
 *   Sending a fact twice changes nothing: processors derive facts with deterministic ids (the ledger refuses
 *   the duplicate), projections record what they applied, webhook deliveries already succeeded are not sent
 *   again. A send that fails hands the facts to their shards' outbox, as the consumers' own relay does.
 * - **Accepted events** that only lived on the events queue: only when they were kept (KeptEvents,
 *   `FACTLINE_KEEP_ACCEPTED`, development only). A kept event is decided when its stream holds a fact caused by
 *   its key, or when it was dead-lettered (a record open, skipped or escalated: the operator owns it — sending
 *   it again would fail again into a second record); any other kept event is sent again, as it was accepted (same
 *   idempotency key: the events consumer dedupes it if it was decided after all); kept requests older than the
 *   setting are pruned. Without keeping, nothing can bring such an event back.
 *
 * One call does a bounded amount (`windowsPerCall` shard windows) and answers a cursor to go on with; the
 * events are handled by the first call (no cursor). It is an HTTP call the CLI repeats, not a batch job: a
 * batch job's own chunk messages live on a queue — the very thing a restart loses. `dryRun` counts and
 * changes nothing. Scanning reads rows; in production prefer a short window (each shard is walked whole).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { type Envelope, type Fact, tenantKey } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"
import { Ledger } from "../ledger/Ledger.js"
import type { ShardCursor } from "../ledger/LedgerProtocol.js"
import * as LedgerTopology from "../ledger/LedgerTopology.js"
import * as Shards from "../ledger/Shards.js"
import * as KeptEvents from "../producing/KeptEvents.js"
import { Producer } from "../producing/Producer.js"
import * as FactRelay from "../relay/FactRelay.js"
import { Registry } from "../registry/Registry.js"
import * as Bindings from "../platform/Bindings.js"
import * as Cursor from "../tables/Cursor.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as DeadLetterStore from "./DeadLetterStore.js"

/** Facts one shard window scans (the shard's RPC caps it at 5,000). */
export const scanPerWindow = 1_000
/** Shard windows one call walks before it answers a cursor. */
export const windowsPerCall = 48

/** Where a walk goes on: inside shard `shard` after `after`, or (no `after`) with the shard after `shard`. */
interface Position {
  readonly shard: string
  readonly after?: ShardCursor
}

/** The walk's cursor (`tables/Cursor`): `[shard]`, or `[shard, stream, sequence]` inside a shard. */
const encode = (p: Position) => Cursor.encode(p.after === undefined ? [p.shard] : [p.shard, p.after.stream, p.after.sequence])
const decode = (cursor: string): Position | undefined => {
  const inside = Cursor.decode(cursor, ["string", "string", "integer"])
  if (inside !== undefined) return { shard: inside[0] as string, after: { stream: inside[1] as string, sequence: inside[2] as number } }
  const between = Cursor.decode(cursor, ["string"])
  return between === undefined ? undefined : { shard: between[0] as string }
}

/** What the kept events say (null when keeping is off, or on a call with a cursor: the first call does them). */
export interface EventsReport {
  /** Events kept and accepted since `since`. */
  readonly kept: number
  /** Of those, events whose stream holds a fact caused by their key, or that were dead-lettered: nothing to do. */
  readonly decided: number
  /** Of the decided, events dead-lettered (a record open, skipped or escalated) with no fact. */
  readonly dead_lettered: number
  /** Sent again to the events queue (dry run: that would be). */
  readonly resent: number
}

export interface Report {
  readonly since: string
  readonly dry_run: boolean
  /** Facts appended since `since` found in the shards this call walked. */
  readonly facts: number
  /** (fact, destination) pairs sent again (dry run: that would be). */
  readonly relayed: number
  /** `sendBatch` calls made. */
  readonly sends: number
  /** Facts whose send failed and were handed to their shard's outbox (relayed later by its alarm). */
  readonly handed_over: number
  /** Ledger shards walked to their end by this call. */
  readonly shards: number
  readonly events: EventsReport | null
  /** Call again with it to go on; null: done. */
  readonly next_cursor: string | null
}

const invalidCursor = () => new Failure.InvalidInput({ code: "invalid_request", message: "cursor is not one this endpoint answered; start again without it", problems: [{ path: "cursor", message: "malformed" }] })

/** The kept events accepted since `since`, which have no fact caused by their key yet: sent again unless `dryRun`. */
const recoverEvents = (since: string, dryRun: boolean, keepAcceptedMs: number) =>
  Effect.gen(function*() {
    if (keepAcceptedMs <= 0) return null
    const storage = yield* Bindings.PayloadBucket
    const now = yield* Clock.currentTimeMillis
    if (!dryRun) yield* KeptEvents.prune(storage, new Date(now - keepAcceptedMs).toISOString())
    // One copy per key (a client's retry was kept twice).
    const byKey = new Map<string, Envelope>()
    for (const e of yield* KeptEvents.since(storage, since)) byKey.set(tenantKey(e.tenant_id, e.idempotency_key), e)
    const kept = [...byKey.values()]
    if (kept.length === 0) return { kept: 0, decided: 0, dead_lettered: 0, resent: 0 } satisfies EventsReport
    const ledger = yield* Ledger
    const streams = new Map<string, { tenant_id: string; stream: string }>()
    for (const e of kept) streams.set(Shards.streamKey({ tenant_id: e.tenant_id, stream: e.subject }), { tenant_id: e.tenant_id, stream: e.subject })
    const states = yield* ledger.readStreams([...streams.values()])
    const causes = new Set(states.flatMap((s) => s.facts.map((f) => tenantKey(s.tenant_id, f.causation_id))))
    const withoutFact = kept.filter((e) => !causes.has(tenantKey(e.tenant_id, e.idempotency_key)))
    const held = withoutFact.length === 0 ? new Set<string>() : yield* (yield* DeadLetterStore.DeadLetterStore).held(RetryPolicy.events.queue, withoutFact)
    const undecided = withoutFact.filter((e) => !held.has(tenantKey(e.tenant_id, e.idempotency_key)))
    if (!dryRun && undecided.length > 0) {
      const producer = yield* Producer
      yield* producer.send(undecided)
    }
    return { kept: kept.length, decided: kept.length - undecided.length, dead_lettered: withoutFact.length - undecided.length, resent: undecided.length } satisfies EventsReport
  })

/**
 * One call of recovery: see the module comment. `since` is ISO-8601; `keepAcceptedMs` is the setting
 * `FACTLINE_KEEP_ACCEPTED` (0: events are not kept, only facts are recovered).
 */
export const recover = Effect.fn("Recovery.recover")(function*(options: { readonly since: string; readonly dryRun: boolean; readonly keepAcceptedMs: number; readonly cursor?: string }) {
  const position = options.cursor === undefined ? undefined : decode(options.cursor)
  if (options.cursor !== undefined && position === undefined) return yield* invalidCursor()
  const ledger = yield* Ledger
  const registry = yield* Registry
  const events = position === undefined ? yield* recoverEvents(options.since, options.dryRun, options.keepAcceptedMs) : null

  let facts = 0
  let relayed = 0
  let sends = 0
  let handedOver = 0
  let shards = 0
  let windows = 0
  // The shard being walked and where in it; then the shards after it, a page of keys at a time.
  let current: Position | undefined = position?.after === undefined ? undefined : position
  let lastShard = position?.shard ?? ""
  // Shard keys after `lastShard`, read a page at a time.
  let upcoming: Array<string> = []
  const relay = (found: ReadonlyArray<Fact>) =>
    Effect.gen(function*() {
      const items = found.map((fact) => ({ fact, destinations: registry.destinationsFor(fact.type) })).filter((i) => i.destinations.length > 0)
      facts += found.length
      relayed += items.reduce((n, i) => n + i.destinations.length, 0)
      if (options.dryRun || items.length === 0) return
      const report = yield* FactRelay.relay(items)
      sends += report.sends
      handedOver += report.handedOver
      if (report.unrelayed.size > 0) {
        return yield* new Failure.Unavailable({ service: "the queues", message: `${report.unrelayed.size} fact(s) could not be relayed nor handed to their shard: ${report.error ?? "unknown error"}; run recover again` })
      }
    })

  for (;;) {
    if (current === undefined) {
      if (upcoming.length === 0) upcoming = [...yield* LedgerTopology.shardsAfter(lastShard, 100)]
      const next = upcoming.shift()
      if (next === undefined) break
      current = { shard: next }
    }
    if (windows >= windowsPerCall) {
      return { since: options.since, dry_run: options.dryRun, facts, relayed, sends, handed_over: handedOver, shards, events, next_cursor: encode(current.after === undefined ? { shard: lastShard } : current) } satisfies Report
    }
    const window = yield* ledger.readShardSince(current.shard, current.after, options.since, scanPerWindow)
    windows++
    yield* relay(window.facts)
    if (window.next === undefined) {
      shards++
      lastShard = current.shard
      current = undefined
    } else {
      current = { shard: current.shard, after: window.next }
    }
  }
  return { since: options.since, dry_run: options.dryRun, facts, relayed, sends, handed_over: handedOver, shards, events, next_cursor: null } satisfies Report
})
