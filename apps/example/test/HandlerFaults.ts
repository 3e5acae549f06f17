/**
 * Faults in the test Worker's own HTTP and queue handlers, for the chaos run's erasure case
 * (test/chaos/erasure.chaos.test.ts). While `install(options)` is in force, every request and queue batch the test
 * Worker handles (test/worker.ts) runs on bindings that fail: D1 (the platform database and the read databases), R2
 * (the payload bucket) and the tenants' key stores (the LedgerShard namespace's `currentKeys`, `readKeys` and
 * `eraseKeys`; the ledger's own RPCs go through). Per kind, the first `first` calls after `install` are refused (the
 * stores go away mid-way), then a share `rate` of the calls fails, drawn by a seeded generator (a fixed every-k-th
 * call would hit the same call of every retry of a step that makes k calls) — refused, or (D1 and the key store)
 * its reply lost after the call went through, alternating. Everything else goes to the real local binding.
 *
 * Nothing in the runtime knows: the Worker's entry swaps its env before calling the platform's (a module shared by
 * the test runner and the Worker, as Drain.ts, WorkflowFaults.ts and `overrideSettings` are). A LedgerShard keeps
 * its own env (its relay sends and payload reads are not faulted).
 */
import * as CountingBindings from "@factline/core/testing/bindings"
import * as Faults from "./faults.js"

export interface Rule {
  /** The first calls after `install` refused. */
  readonly first: number
  /** Then this share of the calls fails (0: none). */
  readonly rate: number
}

export interface Options {
  readonly d1: Rule
  readonly r2: Rule
  readonly keyStore: Rule
  /** The seed of the draws (a run's faults repeat with its seed). */
  readonly seed: number
}

type Kind = "d1" | "r2" | "keyStore"
export type Counts = Record<Kind, { calls: number; refused: number; lostReplies: number }>

let installed: { readonly options: Options; readonly counts: Counts; readonly envs: WeakMap<object, object> } | undefined

export const install = (options: Options): Counts => {
  const counts: Counts = { d1: { calls: 0, refused: 0, lostReplies: 0 }, r2: { calls: 0, refused: 0, lostReplies: 0 }, keyStore: { calls: 0, refused: 0, lostReplies: 0 } }
  installed = { options, counts, envs: new WeakMap() }
  return counts
}

export const uninstall = () => {
  installed = undefined
}

/** mulberry32: a small seeded generator of numbers in [0, 1). */
const generator = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const ruled = (options: Options, counts: Counts, kind: Kind, lostReplies: boolean) => {
  const rule = options[kind]
  const draw = generator(options.seed + kind.length)
  let faults = 0
  return async <T>(what: string, call: () => Promise<T>): Promise<T> => {
    const c = counts[kind]
    const n = ++c.calls
    const fail = n <= rule.first || draw() < rule.rate
    if (!fail) return call()
    if (n <= rule.first || !lostReplies || faults++ % 2 === 0) {
      c.refused++
      throw new Error(`injected fault: ${what} refused (call ${n})`)
    }
    await call()
    c.lostReplies++
    throw new Error(`injected fault: ${what} succeeded but its reply was lost (call ${n})`)
  }
}

const keyStoreMethods = new Set(["currentKeys", "readKeys", "eraseKeys"])

const passThrough = (target: object, prop: PropertyKey) => {
  const value = (target as any)[prop]
  return typeof value === "function" ? value.bind(target) : value
}

/** The LedgerShard namespace with its key store calls faulted (the ledger's own RPCs go through). */
const keyStores = <N extends { get(id: DurableObjectId): unknown }>(ns: N, run: ReturnType<typeof ruled>): N =>
  new Proxy(ns, {
    get(target, prop) {
      if (prop === CountingBindings.unwrap) return (target as any)[CountingBindings.unwrap] ?? target
      if (prop !== "get") return passThrough(target, prop)
      return (id: DurableObjectId) => {
        const stub = target.get(id) as any
        return new Proxy(stub, {
          get(s, method) {
            if (typeof method !== "string" || !keyStoreMethods.has(method)) return s[method]
            return (...args: Array<unknown>) => run(`key store ${method}`, () => s[method](...args))
          }
        })
      }
    }
  })

/** The payload bucket with its reads, writes, lists and deletes faulted. */
const bucket = (b: R2Bucket, run: ReturnType<typeof ruled>): R2Bucket =>
  new Proxy(b, {
    get(target, prop) {
      if (prop === CountingBindings.unwrap) return (target as any)[CountingBindings.unwrap] ?? target
      if (prop === "get" || prop === "head" || prop === "put" || prop === "delete" || prop === "list") {
        return (...args: Array<unknown>) => run(`R2 ${prop}`, () => (target as any)[prop](...args))
      }
      return passThrough(target, prop)
    }
  })

/** The env a request or batch runs with: the faulty copy of `env` while installed (one object per env: one runtime). */
export const envOf = <E extends object>(env: E): E => {
  const current = installed
  if (current === undefined) return env
  let faulty = current.envs.get(env)
  if (faulty === undefined) {
    const runD1 = ruled(current.options, current.counts, "d1", true)
    const runR2 = ruled(current.options, current.counts, "r2", false)
    const runKeys = ruled(current.options, current.counts, "keyStore", true)
    const out: Record<string, unknown> = { ...(env as Record<string, unknown>) }
    for (const [name, value] of Object.entries(env as Record<string, unknown>)) {
      if (name === "DB" || /^FACTLINE_READ_DB_\d+$/.test(name)) out[name] = Faults.d1(value as D1Database, runD1)
      else if (name === "LEDGER") out[name] = keyStores(value as DurableObjectNamespace, runKeys)
      else if (name === "PAYLOADS") out[name] = bucket(value as R2Bucket, runR2)
    }
    current.envs.set(env, (faulty = out))
  }
  return faulty as E
}
