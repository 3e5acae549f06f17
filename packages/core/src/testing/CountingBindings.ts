/**
 * Counting wrappers around real Cloudflare bindings, for tests and benchmarks.
 *
 * Calls still go to the real D1 / Durable Object / Queue; the wrappers only
 * count what each costs: D1 round trips (a `batch()` is one), the statements
 * they carry and the rows D1 reports read and written, DO RPCs and the shards they hit, queue send
 * calls and messages. Not for production code paths.
 */

export interface Counts {
  d1RoundTrips: number
  d1Statements: number
  d1RowsRead: number
  d1RowsWritten: number
  doRpcs: number
  queueSends: number
  queueMessages: number
  /** Billable 64 KB units of the messages sent (Queues bills each operation per 64 KB of message). */
  queueUnits: number
  readonly shards: Set<string>
}

/** Answered by the counting proxies: the real binding they wrap (so per-binding caches see one binding). */
export const unwrap = Symbol.for("@factline/core/testing/unwrap")

export const make = (): Counts => ({ d1RoundTrips: 0, d1Statements: 0, d1RowsRead: 0, d1RowsWritten: 0, doRpcs: 0, queueSends: 0, queueMessages: 0, queueUnits: 0, shards: new Set() })

const addMeta = <R>(counts: Counts, result: R): R => {
  for (const r of Array.isArray(result) ? result : [result]) {
    const meta = (r as { meta?: { rows_read?: number; rows_written?: number } } | null)?.meta
    counts.d1RowsRead += meta?.rows_read ?? 0
    counts.d1RowsWritten += meta?.rows_written ?? 0
  }
  return result
}

const passThrough = (target: object, prop: PropertyKey) => {
  const value = (target as any)[prop]
  return typeof value === "function" ? value.bind(target) : value
}

export const d1 = (db: D1Database, counts: Counts): D1Database => {
  const real = new WeakMap<object, D1PreparedStatement>()
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...args: Array<unknown>) => wrap(target.bind(...args))
        if (prop === "run" || prop === "all") {
          return async () => (counts.d1RoundTrips++, counts.d1Statements++, addMeta(counts, await target[prop]()))
        }
        if (prop === "raw") return async (options?: any) => (counts.d1RoundTrips++, counts.d1Statements++, target.raw(options))
        if (prop === "first") {
          // `first` hides D1's meta: run it through `all` so the rows read are counted.
          return async (column?: string) => {
            counts.d1RoundTrips++
            counts.d1Statements++
            const row = addMeta(counts, await target.all()).results[0] ?? null
            return column === undefined || row === null ? row : row[column]
          }
        }
        return passThrough(target, prop)
      }
    })
    real.set(proxy, statement)
    return proxy
  }
  return new Proxy(db, {
    get(target, prop) {
      if (prop === unwrap) return (target as any)[unwrap] ?? target
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql))
      if (prop === "batch") {
        return async (statements: Array<D1PreparedStatement>) =>
          (counts.d1RoundTrips++, counts.d1Statements += statements.length, addMeta(counts, await target.batch(statements.map((s) => real.get(s) ?? s))))
      }
      if (prop === "exec") return (sql: string) => (counts.d1RoundTrips++, target.exec(sql))
      return passThrough(target, prop)
    }
  })
}

/** Any Durable Object namespace (the LedgerShard one typed by its RPC, or an untyped one), counted. */
export const durableObjects = <N extends { get(id: DurableObjectId): unknown }>(ns: N, counts: Counts): N =>
  new Proxy(ns, {
    get(target, prop) {
      if (prop !== "get") return passThrough(target, prop)
      return (id: DurableObjectId) => {
        const stub = target.get(id) as any
        return new Proxy(stub, {
          get(s, method) {
            // RPC stubs answer any property; only count calls of named methods.
            if (typeof method !== "string" || method === "then") return s[method]
            return (...args: Array<unknown>) => {
              counts.doRpcs++
              counts.shards.add(id.toString())
              return s[method](...args)
            }
          }
        })
      }
    }
  })

const encoder = new TextEncoder()
const units = (body: unknown) => Math.max(1, Math.ceil(encoder.encode(JSON.stringify(body)).byteLength / (64 * 1024)))

export const queue = <T>(q: Queue<T>, counts: Counts): Queue<T> => ({
  send: (body: T, options?: QueueSendOptions) => (counts.queueSends++, counts.queueMessages++, counts.queueUnits += units(body), q.send(body, options)),
  sendBatch: (messages: Iterable<MessageSendRequest<T>>, options?: QueueSendBatchOptions) => {
    const list = [...messages]
    counts.queueSends++
    counts.queueMessages += list.length
    for (const m of list) counts.queueUnits += units(m.body)
    return q.sendBatch(list, options)
  },
  metrics: () => (q as any).metrics()
}) as Queue<T>

/** A copy of a Worker env whose DB, LEDGER and every `*_QUEUE` / `*_DLQ` binding (a queue group's `*_QUEUE_n` too) count their calls. */
export const env = <E extends Record<string, unknown>>(source: E, counts: Counts): E => {
  const out: Record<string, unknown> = { ...source }
  for (const [name, value] of Object.entries(source)) {
    if (name === "DB") out[name] = d1(value as D1Database, counts)
    else if (name === "LEDGER") out[name] = durableObjects(value as DurableObjectNamespace, counts)
    else if (/_(QUEUE|DLQ)(_\d+)?$/.test(name)) out[name] = queue(value as Queue, counts)
  }
  return out as E
}
