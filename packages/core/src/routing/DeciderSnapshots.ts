/**
 * Deciders' snapshots on the dispatch path (Handler.Snapshot): what a stream read asks its shard for, where a
 * decider's fold starts, and the snapshot an append carries.
 *
 * A stream is read with snapshots only when every decider deciding on it in the batch declares one (else the
 * whole stream is read, as before). With them the read also names the first fact id each message's decision
 * would have, so a redelivered message finds its stored decision even when a snapshot covers it. A stored
 * snapshot is decoded with the decider's declared schema; one that does not decode is logged and ignored (the
 * stream is then folded from its start, read again in full). A snapshot rides on an append group and is stored
 * only if that group is appended at the snapshot's sequence (LedgerSnapshots): it is never written from a state
 * that was not appended. Nothing here trusts the shard to have checked what it stores.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import type * as Handler from "../definitions/Handler.js"
import * as FactId from "../ledger/FactId.js"
import { Ledger } from "../ledger/Ledger.js"
import type { Snapshot, StreamKey, StreamRead, StreamState } from "../ledger/LedgerProtocol.js"
import * as Shards from "../ledger/Shards.js"
import type { Routed } from "../registry/Registry.js"

/** Where a fold starts: a state and the sequence it covers (the initial state covers 0). */
export interface Start {
  readonly state: unknown
  readonly after: number
}

/** The first fact id the message's decision has (position 0): a stored one means the message was decided. */
export const firstFactId = (routed: Routed) =>
  FactId.make({ tenantId: routed.message.tenantId, cause: routed.message.idempotencyKey, decidedBy: routed.handler.name, position: 0 })

/** What to read for one stream decided on by these messages: its snapshots when every decider there declares one. */
export const readFor = async (key: StreamKey, routed: ReadonlyArray<Routed>): Promise<StreamRead> => {
  const deciders = routed.map((r) => r.handler as Handler.Decider)
  if (deciders.some((d) => d.snapshot === undefined)) return key
  const unique = new Map(deciders.map((d) => [d.name, d] as const))
  return {
    ...key,
    snapshots: [...unique.values()].map((d) => ({ decider: d.name, version: d.snapshot!.version, fingerprint: d.snapshot!.fingerprint })),
    decided: await Promise.all(routed.map(firstFactId))
  }
}

/**
 * Where `decider`'s fold of `state` starts: its snapshot, decoded, when the read found one it can use; else the
 * initial state. `undefined`: a snapshot was found but does not decode — logged; the caller reads the stream whole.
 */
export const startOf = (decider: Handler.Decider, state: StreamState): Effect.Effect<Start | undefined> => {
  const initial: Start = { state: decider.initialState, after: 0 }
  const stored = decider.snapshot === undefined ? undefined : state.snapshots?.find((s) => s.decider === decider.name && s.version === decider.snapshot!.version && s.fingerprint === decider.snapshot!.fingerprint)
  if (stored === undefined) return Effect.succeed(state.after === undefined || state.after === 0 ? initial : undefined)
  const decoded = decodeState(decider.snapshot!, stored.state)
  if (Exit.isSuccess(decoded)) return Effect.succeed({ state: decoded.value, after: stored.sequence })
  return Effect.as(
    Effect.logWarning(`decider ${decider.name}: its snapshot of stream ${state.stream} at sequence ${stored.sequence} (version ${stored.version}) does not decode with its schema; folding the whole stream`, decoded.cause),
    undefined
  )
}

/** JSON text parsed, or the exception as a failed exit. */
const parse = (text: string): Exit.Exit<unknown, unknown> => {
  try {
    return Exit.succeed(JSON.parse(text))
  } catch (cause) {
    return Exit.fail(cause)
  }
}

/** An encoded state as JSON text, or the exception (a schema whose encoded side is not JSON) as a failed exit. */
const stringify = (json: unknown): Exit.Exit<string, unknown> => {
  try {
    return Exit.succeed(JSON.stringify(json))
  } catch (cause) {
    return Exit.fail(cause)
  }
}

const decodeState = (snapshot: Handler.Snapshot<unknown>, text: string): Exit.Exit<unknown, unknown> => {
  const json = parse(text)
  return Exit.isSuccess(json) ? Schema.decodeUnknownExit(snapshot.schema)(json.value) : json
}

/** Whether a decision that folded from `start` and brings its stream to `version` should carry a new snapshot. */
export const due = (decider: Handler.Decider, start: Start, version: number) =>
  decider.snapshot !== undefined && version - start.after >= decider.snapshot.every

/** The snapshot of `state` at `sequence`, encoded with the decider's schema; undefined (logged) when it does not encode. */
export const encode = (decider: Handler.Decider, state: unknown, sequence: number): Effect.Effect<Snapshot | undefined> => {
  const snapshot = decider.snapshot!
  const json: Exit.Exit<unknown, unknown> = Schema.encodeUnknownExit(snapshot.schema)(state)
  const encoded = Exit.isSuccess(json) ? stringify(json.value) : json
  if (Exit.isSuccess(encoded)) return Effect.succeed({ decider: decider.name, version: snapshot.version, fingerprint: snapshot.fingerprint, sequence, state: encoded.value })
  return Effect.as(Effect.logWarning(`decider ${decider.name}: its state does not encode with its snapshot schema; no snapshot written`, encoded.cause), undefined)
}

/** A stream as the deciders of a batch read it: its state, and where each of its deciders' folds starts (by name). */
export interface DeciderState extends StreamState {
  readonly starts: ReadonlyMap<string, Start>
}

/** Each decider's start in `state`, or undefined when a snapshot found does not decode. */
const resolve = Effect.fnUntraced(function*(state: StreamState, deciders: ReadonlyArray<Handler.Decider>) {
  const starts = new Map<string, Start>()
  for (const decider of deciders) {
    const start = yield* startOf(decider, state)
    if (start === undefined) return undefined
    starts.set(decider.name, start)
  }
  return { ...state, starts } satisfies DeciderState
})

/**
 * The streams of these deciders' messages, by `Shards.streamKey`: one read per shard (with snapshots where every
 * decider of the stream declares one); a stream whose snapshot does not decode is read again whole.
 */
export const readStates = Effect.fn("Dispatch.readStates")(function*(routed: ReadonlyArray<Routed>) {
  const ledger = yield* Ledger
  const byStream = new Map<string, { key: StreamKey; routed: Array<Routed> }>()
  for (const r of routed) {
    const key = { tenant_id: r.message.tenantId, stream: r.message.subject }
    const entry = byStream.get(Shards.streamKey(key))
    if (entry) entry.routed.push(r)
    else byStream.set(Shards.streamKey(key), { key, routed: [r] })
  }
  const entries = [...byStream.values()]
  const reads = yield* Effect.promise(() => Promise.all(entries.map((e) => readFor(e.key, e.routed))))
  const states = yield* ledger.readStreams(reads)
  const out = new Map<string, DeciderState>()
  const whole: Array<number> = []
  for (const [i, state] of states.entries()) {
    const resolved = yield* resolve(state, entries[i]!.routed.map((r) => r.handler as Handler.Decider))
    if (resolved === undefined) whole.push(i)
    else out.set(Shards.streamKey(state), resolved)
  }
  if (whole.length > 0) {
    const again = yield* ledger.readStreams(whole.map((i) => entries[i]!.key))
    for (const state of again) {
      const initial = new Map(byStream.get(Shards.streamKey(state))!.routed.map((r) => [r.handler.name, { state: (r.handler as Handler.Decider).initialState, after: 0 }] as const))
      out.set(Shards.streamKey(state), { ...state, starts: initial })
    }
  }
  return out
})
