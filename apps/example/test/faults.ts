/**
 * Fault-injecting wrappers around the real bindings, for the transient
 * infrastructure fault cases: every k-th call of a binding (D1, the LedgerShard
 * namespace, the platform queues) fails. A failure is either a **refused** call
 * (it never reaches the binding) or a **lost reply** (the call went through —
 * the D1 transaction committed, the DO appended, the queue took the messages —
 * and then the caller is told it failed), alternating when `lostReplies` is on.
 * Everything that does get through goes to the real local binding; the wrappers
 * only decide when to throw, and count what they injected.
 *
 * The DLQ bindings are not faulted but recorded: a case asserts nothing was
 * dead-lettered. The `unwrap` symbol answers the real binding (as the counting
 * wrappers do), so per-binding caches (the ledger topology) see one binding.
 */
import * as CountingBindings from "@factline/core/testing/bindings"

export interface Schedule {
  /** Every `d1`-th D1 call fails (a `batch()` is one call; 0 = never). */
  readonly d1?: number
  /** Every `durableObjects`-th LedgerShard RPC fails. */
  readonly durableObjects?: number
  /** Every `queues`-th send / sendBatch to a platform queue fails. */
  readonly queues?: number
  /** Every `workflows`-th call of the Workflows binding (`create`, an instance's `sendEvent`) fails. */
  readonly workflows?: number
  /** Alternate refused calls with lost replies (the call succeeded, the caller saw an error). */
  readonly lostReplies?: boolean
}

export interface Injected {
  calls: { d1: number; durableObjects: number; queues: number; workflows: number }
  refused: { d1: number; durableObjects: number; queues: number; workflows: number }
  lostReplies: { d1: number; durableObjects: number; queues: number; workflows: number }
  /** Bodies sent to any dead-letter queue. */
  readonly deadLettered: Array<unknown>
}

type Kind = "d1" | "durableObjects" | "queues" | "workflows"

export const newInjected = (): Injected => ({
  calls: { d1: 0, durableObjects: 0, queues: 0, workflows: 0 },
  refused: { d1: 0, durableObjects: 0, queues: 0, workflows: 0 },
  lostReplies: { d1: 0, durableObjects: 0, queues: 0, workflows: 0 },
  deadLettered: []
})

export const totalInjected = (injected: Injected) =>
  Object.values(injected.refused).reduce((a, b) => a + b, 0) + Object.values(injected.lostReplies).reduce((a, b) => a + b, 0)

/** Runs `call` under the schedule: on a k-th call, refuses it or loses its reply. */
const scheduled = (schedule: Schedule, injected: Injected, kind: Kind) => {
  const every = schedule[kind] ?? 0
  let faults = 0
  return async <T>(what: string, call: () => Promise<T>): Promise<T> => {
    const n = ++injected.calls[kind]
    if (every <= 0 || n % every !== 0) return call()
    const lose = schedule.lostReplies === true && faults++ % 2 === 1
    if (!lose) {
      injected.refused[kind]++
      throw new Error(`injected fault: ${what} refused (call ${n})`)
    }
    await call()
    injected.lostReplies[kind]++
    throw new Error(`injected fault: ${what} succeeded but its reply was lost (call ${n})`)
  }
}

const passThrough = (target: object, prop: PropertyKey) => {
  const value = (target as any)[prop]
  return typeof value === "function" ? value.bind(target) : value
}

export const d1 = (db: D1Database, run: ReturnType<typeof scheduled>): D1Database => {
  const real = new WeakMap<object, D1PreparedStatement>()
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...args: Array<unknown>) => wrap(target.bind(...args))
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") {
          return (...args: Array<unknown>) => run(`D1 ${String(prop)}`, () => (target as any)[prop](...args))
        }
        return passThrough(target, prop)
      }
    })
    real.set(proxy, statement)
    return proxy
  }
  return new Proxy(db, {
    get(target, prop) {
      if (prop === CountingBindings.unwrap) return (target as any)[CountingBindings.unwrap] ?? target
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql))
      if (prop === "batch") return (statements: Array<D1PreparedStatement>) => run("D1 batch", () => target.batch(statements.map((s) => real.get(s) ?? s)))
      if (prop === "exec") return (sql: string) => run("D1 exec", () => target.exec(sql))
      return passThrough(target, prop)
    }
  })
}

export const durableObjects = <N extends { get(id: DurableObjectId): unknown }>(ns: N, run: ReturnType<typeof scheduled>): N =>
  new Proxy(ns, {
    get(target, prop) {
      if (prop !== "get") return passThrough(target, prop)
      return (id: DurableObjectId) => {
        const stub = target.get(id) as any
        return new Proxy(stub, {
          get(s, method) {
            // RPC stubs answer any property; only calls of named methods are faulted.
            if (typeof method !== "string" || method === "then") return s[method]
            return (...args: Array<unknown>) => run(`LedgerShard.${method}`, () => s[method](...args))
          }
        })
      }
    }
  })

export const queue = (q: Queue, name: string, run: ReturnType<typeof scheduled>): Queue => ({
  send: (body: unknown, options?: QueueSendOptions) => run(`${name}.send`, () => q.send(body, options)),
  sendBatch: (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
    const list = [...messages]
    return run(`${name}.sendBatch`, () => q.sendBatch(list, options))
  },
  metrics: () => (q as any).metrics()
}) as Queue

/**
 * The Workflows binding (`FACTLINE_WORKFLOWS`): `create` and an instance's `sendEvent` fail on the schedule — a
 * lost reply of `create` made the instance (the retry finds it: `instance.already_exists`), a lost reply of
 * `sendEvent` delivered the event (the retry delivers it again). `get`, `status` and the rest go through.
 */
export const workflows = (binding: Workflow, run: ReturnType<typeof scheduled>): Workflow =>
  new Proxy(binding, {
    get(target, prop) {
      if (prop === "create") return (options: WorkflowInstanceCreateOptions) => run("Workflows.create", () => target.create(options))
      if (prop === "get") {
        return async (id: string) => {
          const instance = await target.get(id)
          return new Proxy(instance, {
            get(i, p) {
              if (p === "sendEvent") return (event: { type: string; payload: unknown }) => run("WorkflowInstance.sendEvent", () => i.sendEvent(event))
              return passThrough(i, p)
            }
          })
        }
      }
      return passThrough(target, prop)
    }
  })

const recordingDlq = (q: Queue, injected: Injected): Queue => ({
  send: (body: unknown, options?: QueueSendOptions) => (injected.deadLettered.push(body), q.send(body, options)),
  sendBatch: (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
    const list = [...messages]
    injected.deadLettered.push(...list.map((m) => m.body))
    return q.sendBatch(list, options)
  },
  metrics: () => (q as any).metrics()
}) as Queue

/**
 * A copy of a Worker env whose DB, LEDGER, FACTLINE_WORKFLOWS and `*_QUEUE` bindings (and a group's `*_QUEUE_n`)
 * fail on `schedule`; `*_DLQ` bindings are recorded.
 */
export const env = <E extends Record<string, unknown>>(source: E, schedule: Schedule, injected: Injected = newInjected()) => {
  const out: Record<string, unknown> = { ...source }
  const runD1 = scheduled(schedule, injected, "d1")
  const runDo = scheduled(schedule, injected, "durableObjects")
  const runQueues = scheduled(schedule, injected, "queues")
  const runWorkflows = scheduled(schedule, injected, "workflows")
  for (const [name, value] of Object.entries(source)) {
    if (name === "DB") out[name] = d1(value as D1Database, runD1)
    else if (name === "LEDGER") out[name] = durableObjects(value as DurableObjectNamespace, runDo)
    else if (name === "FACTLINE_WORKFLOWS") out[name] = workflows(value as Workflow, runWorkflows)
    else if (/_DLQ$/.test(name)) out[name] = recordingDlq(value as Queue, injected)
    else if (/_QUEUE(_\d+)?$/.test(name)) out[name] = queue(value as Queue, name, runQueues)
  }
  return { env: out as E, injected }
}

/** A D1 database whose statements matching `refuse` (their SQL) throw before reaching it; every other call goes through. */
export const refusingStatements = (db: D1Database, refuse: (sql: string) => boolean): D1Database =>
  new Proxy(db, {
    get(target, prop) {
      if (prop === CountingBindings.unwrap) return (target as any)[CountingBindings.unwrap] ?? target
      if (prop === "prepare") {
        return (sql: string) => {
          const statement = target.prepare(sql)
          if (!refuse(sql)) return statement
          const refused = () => Promise.reject(new Error(`injected fault: D1 refused ${sql.slice(0, 40)}`))
          const wrap = (s: D1PreparedStatement): D1PreparedStatement =>
            new Proxy(s, { get: (t, p) => (p === "bind" ? (...args: Array<unknown>) => wrap(t.bind(...args)) : p === "run" || p === "all" || p === "first" || p === "raw" ? refused : passThrough(t, p)) })
          return wrap(statement)
        }
      }
      return passThrough(target, prop)
    }
  })

/** An R2 bucket whose puts of keys matching `refuse` throw before reaching it; reads and other puts go through. */
export const refusingPuts = (bucket: R2Bucket, refuse: (key: string) => boolean): R2Bucket =>
  new Proxy(bucket, {
    get(target, prop) {
      if (prop === "put") {
        return (key: string, ...rest: Array<unknown>) =>
          refuse(key) ? Promise.reject(new Error(`injected fault: R2 put of ${key} refused`)) : (target.put as any)(key, ...rest)
      }
      return passThrough(target, prop)
    }
  })

/** A D1 database that is down: every call (statement, batch, exec) is refused before it reaches the database. */
export const down = (db: D1Database): D1Database =>
  d1(db, async <T>(what: string, _call: () => Promise<T>): Promise<T> => {
    throw new Error(`injected fault: ${what} refused (the database is down)`)
  })

/** An R2 bucket whose deletes throw before reaching it (a run that dies between its insert and its delete); the rest goes through. */
export const refusingDeletes = (bucket: R2Bucket): R2Bucket =>
  new Proxy(bucket, {
    get(target, prop) {
      if (prop === "delete") return () => Promise.reject(new Error("injected fault: R2 delete refused"))
      return passThrough(target, prop)
    }
  })
