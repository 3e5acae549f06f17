/**
 * Where a stage's time goes, for the bench's per-stage budget: wrappers around the real bindings that
 * note, per kind of call, the wall time during which at least one such call is in flight (parallel calls
 * counted once). D1 round trips are told apart by the tables their statements touch (the key binding's
 * `accepted_keys`, the metrics rollup's `queue_metrics`, the projections' writes, …).
 *
 * Inside one workerd thread the clock only advances across I/O, so a synchronous step (decode, dispatch,
 * a log line) cannot be timed by itself: what is not inside a binding call is reported as one remainder,
 * "worker CPU" (decode, validation, dispatch, handlers, logging, tracing). Locally every binding call is
 * CPU of the same machine too (D1's SQLite, the Durable Object's storage). Bench only.
 */

export interface Timing {
  /** Milliseconds with at least one call of the kind in flight. */
  readonly ms: Record<string, number>
  /** Calls of each kind. */
  readonly calls: Record<string, number>
  /** Milliseconds with any binding call in flight. */
  anyMs: number
}

export const make = (): Timing => ({ ms: {}, calls: {}, anyMs: 0 })

const inFlight = new WeakMap<Timing, { any: number; anyStarted: number; kinds: Map<string, { n: number; started: number }> }>()
const stateOf = (t: Timing) => {
  let s = inFlight.get(t)
  if (!s) inFlight.set(t, (s = { any: 0, anyStarted: 0, kinds: new Map() }))
  return s
}

const timed = async <A>(t: Timing, kind: string, call: () => Promise<A>): Promise<A> => {
  const s = stateOf(t)
  const k = s.kinds.get(kind) ?? { n: 0, started: 0 }
  s.kinds.set(kind, k)
  const now = performance.now()
  if (k.n++ === 0) k.started = now
  if (s.any++ === 0) s.anyStarted = now
  t.calls[kind] = (t.calls[kind] ?? 0) + 1
  try {
    return await call()
  } finally {
    const end = performance.now()
    if (--k.n === 0) t.ms[kind] = (t.ms[kind] ?? 0) + end - k.started
    if (--s.any === 0) t.anyMs += end - s.anyStarted
  }
}

const tablePatterns: ReadonlyArray<[RegExp, string]> = [
  [/\baccepted_keys\b/, "D1 key binding"],
  [/\bqueue_metrics\b/, "D1 metrics rollup"],
  [/\b(inbox|first_attempts|dead_messages)\b/, "D1 inbox/attempts"],
  [/\bruns\b/, "D1 runs"],
  [/\b(projection_applied|projection_versions)\b/, "D1 projection writes"],
  [/\b(tenant_placements|ledger_tenants|ledger_shards)\b/, "D1 placement/shard map"],
  [/\b(bench_\w+|naive_outcomes|processed_events|hand_\w+)\b/, "D1 bench tables"]
]
const kindOf = (sqls: ReadonlyArray<string>) => {
  const kinds = new Set(sqls.map((sql) => tablePatterns.find(([p]) => p.test(sql))?.[1] ?? "D1 other"))
  return [...kinds].sort().join(" + ")
}

const bindIfFunction = (target: object, prop: PropertyKey) => {
  const value = (target as any)[prop]
  return typeof value === "function" ? value.bind(target) : value
}
const unwrap = Symbol.for("@factline/core/testing/unwrap")

const d1 = (db: D1Database, t: Timing): D1Database => {
  const real = new WeakMap<object, { statement: D1PreparedStatement; sql: string }>()
  const wrap = (statement: D1PreparedStatement, sql: string): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...args: Array<unknown>) => wrap(target.bind(...args), sql)
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") return (...args: Array<any>) => timed(t, kindOf([sql]), () => (target as any)[prop](...args))
        return bindIfFunction(target, prop)
      }
    })
    real.set(proxy, { statement, sql })
    return proxy
  }
  return new Proxy(db, {
    get(target, prop) {
      if (prop === unwrap) return (target as any)[unwrap] ?? target
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql), sql)
      if (prop === "batch") {
        return (statements: Array<D1PreparedStatement>) =>
          timed(t, kindOf(statements.map((s) => real.get(s)?.sql ?? "")), () => target.batch(statements.map((s) => real.get(s)?.statement ?? s)))
      }
      if (prop === "exec") return (sql: string) => timed(t, kindOf([sql]), () => target.exec(sql))
      return bindIfFunction(target, prop)
    }
  })
}

const durableObjects = <N extends { get(id: DurableObjectId): unknown }>(ns: N, t: Timing): N =>
  new Proxy(ns, {
    get(target, prop) {
      if (prop === unwrap) return (target as any)[unwrap] ?? target
      if (prop !== "get") return bindIfFunction(target, prop)
      return (id: DurableObjectId) => {
        const stub = target.get(id) as any
        return new Proxy(stub, {
          get(s, method) {
            if (typeof method !== "string" || method === "then") return s[method]
            return (...args: Array<unknown>) => timed(t, `ledger RPC (${method})`, () => s[method](...args))
          }
        })
      }
    }
  })

const queue = <T>(q: Queue<T>, t: Timing): Queue<T> => ({
  send: (body: T, options?: QueueSendOptions) => timed(t, "relay (queue send)", () => q.send(body, options)),
  sendBatch: (messages: Iterable<MessageSendRequest<T>>, options?: QueueSendBatchOptions) => {
    const list = [...messages]
    return timed(t, "relay (queue send)", () => q.sendBatch(list, options))
  },
  metrics: () => (q as any).metrics(),
  [unwrap]: (q as any)[unwrap] ?? q
}) as Queue<T>

const r2 = (bucket: R2Bucket, t: Timing): R2Bucket =>
  new Proxy(bucket, {
    get(target, prop) {
      if (prop === unwrap) return (target as any)[unwrap] ?? target
      if (prop === "get" || prop === "head" || prop === "put" || prop === "delete") return (...args: Array<any>) => timed(t, "R2", () => (target as any)[prop](...args))
      return bindIfFunction(target, prop)
    }
  })

/** A copy of a Worker env whose D1, ledger, queue and R2 bindings note their time in `t`. */
export const env = <E extends Record<string, unknown>>(source: E, t: Timing): E => {
  const out: Record<string, unknown> = { ...source }
  for (const [name, value] of Object.entries(source)) {
    if (typeof value !== "object" || value === null) continue
    if (name === "DB" || /^FACTLINE_READ_DB_\d+$/.test(name)) out[name] = d1(value as D1Database, t)
    else if (name === "LEDGER") out[name] = durableObjects(value as DurableObjectNamespace, t)
    else if (/_(QUEUE|DLQ)(_\d+)?$/.test(name) || /^BENCH_[A-Z_]+$/.test(name)) out[name] = queue(value as Queue, t)
    else if (name === "PAYLOADS") out[name] = r2(value as R2Bucket, t)
  }
  return out as E
}
