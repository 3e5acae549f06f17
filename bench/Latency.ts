/**
 * The bench's production profile: asynchronous latency around every binding call, so that a run on one
 * local workerd thread (where every binding call is CPU of the same process) also shows what the network
 * does in production — parallel calls overlap, sequential rounds add up.
 *
 * One table of figures (`production`) for every compared pipeline; each call draws its latency from a
 * log-normal distribution through the figure's p50 and p99 (or, with `BENCH_LATENCY_SHAPE=two-point`, p50 with
 * p99 on 1 % of calls: see `Shape`) and waits half of it before the real call and the rest after (a write becomes
 * visible mid-way, as in production). A D1 `batch()` is one round trip. A figure is the whole call as its caller
 * sees it, the callee's own work included (the DO RPC's is a measured warm write, output-gate flush and all): by
 * default the local call's time counts toward the second half — the wait after it is what is left of the draw —
 * so the callee's work, which the one local thread runs in turn for 16 parallel shard appends where Cloudflare
 * runs 16 objects side by side, is not added on top; `BENCH_LATENCY_LOCAL=added` adds it (issue 22's prototype:
 * both halves waited in full around the local call). See `Local`.
 * Turned on only by the bench config's `FACTLINE_BENCH_LATENCY=production` (`BENCH_PROFILE=production`);
 * never part of a production code path. The waits actually slept (timer overshoot included) are tallied.
 */

export interface Figure {
  readonly p50: number
  readonly p99: number
  /** Where the figure comes from: a published or measured source, or "estimate". */
  readonly source: string
}

export type Operation = "queue_send" | "do_rpc" | "d1_round_trip" | "r2_get" | "r2_put" | "webhook_post" | "workflow_step"

/** The production table (milliseconds). Keep in step with README's Performance section and docs/performance.md. */
export const production: Readonly<Record<Operation, Figure>> = {
  queue_send: {
    p50: 60, p99: 200,
    source: "p50: Cloudflare blog, \"Durable Objects aren't just durable, they're fast: a 10x speedup for Cloudflare Queues\" (2024-10-24, blog.cloudflare.com/how-we-built-cloudflare-queues): median send latency ~60 ms; p99: estimate"
  },
  do_rpc: { p50: 10, p99: 40, source: "p50: a warm Durable Object write RPC from a Worker, output-gate flush included, as measured for issue 22's prototype (not published by Cloudflare); p99: estimate" },
  d1_round_trip: { p50: 15, p99: 60, source: "estimate (nothing published; Worker and primary in one region)" },
  r2_get: { p50: 40, p99: 150, source: "estimate (nothing published for same-region gets)" },
  r2_put: { p50: 40, p99: 150, source: "estimate (nothing published for same-region puts)" },
  webhook_post: {
    p50: 100, p99: 500,
    source: "estimate: a tenant's receiver on the public internet answering a small POST on a reused connection; the same for factline's deliveries and the bare POST floor (the bench receiver's own answer is local)"
  },
  workflow_step: {
    p50: 10, p99: 40,
    source: "estimate: Cloudflare publishes no step latency (developers.cloudflare.com/workflows/reference/limits gives sizes and counts only); Workflows run on Durable Objects, so a step's result persisted before the body goes on is taken as one warm DO write, do_rpc's figure, waited after the step's callback (WorkflowStep.ts)"
  }
}

/** Waits drawn and time elapsed around the calls, per operation: what the profile added to a run. */
export interface Tally {
  calls: Record<Operation, number>
  drawnMs: Record<Operation, number>
  /** From before the first wait to after the second: both waits, their timers' overshoot and the local call. */
  elapsedMs: Record<Operation, number>
  /**
   * Phases: spells with at least one call of the operation in flight (parallel calls are one phase, as a batch's
   * 16 shard appends are), their wall time, and the longest wait drawn in each — what the phase would take with
   * no local work. The difference is the local calls themselves and the one thread's other work meanwhile.
   */
  phases: Record<Operation, number>
  phaseMs: Record<Operation, number>
  phaseDrawnMaxMs: Record<Operation, number>
}

const zero = (): Record<Operation, number> => ({ queue_send: 0, do_rpc: 0, d1_round_trip: 0, r2_get: 0, r2_put: 0, webhook_post: 0, workflow_step: 0 })
const fresh = (): Tally => ({ calls: zero(), drawnMs: zero(), elapsedMs: zero(), phases: zero(), phaseMs: zero(), phaseDrawnMaxMs: zero() })
export const tally: Tally = fresh()
export const resetTally = () => Object.assign(tally, fresh())
const inFlight = { count: zero(), started: zero(), drawnMax: zero() }

/** z of the 99th percentile of the standard normal. */
const z99 = 2.3263
const normal = () => {
  // Box–Muller.
  const u = 1 - Math.random()
  const v = Math.random()
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v)
}
/**
 * How a call's latency is drawn from its figure:
 * - `lognormal` (the default): the log-normal whose median is p50 and whose 99th percentile is p99 — a spread
 *   around the median, so the slowest of N parallel calls is well above p50 (16 calls: ≈ 2.9 × p50 at p99/p50 = 4);
 * - `two-point`: p50, and p99 on 1 % of calls — issue 22's prototype, the model its production targets were
 *   derived under (a network floor near the median with a rare tail).
 * Set per run by the bench config's `FACTLINE_BENCH_LATENCY_SHAPE` (`BENCH_LATENCY_SHAPE`).
 */
export type Shape = "lognormal" | "two-point"
let shape: Shape = "lognormal"
export const shapeOf = () => shape

/** A draw of the figure's latency in the run's shape. */
export const draw = (figure: Figure) =>
  shape === "two-point"
    ? (Math.random() < 0.01 ? figure.p99 : figure.p50)
    : figure.p50 * Math.exp((Math.log(figure.p99 / figure.p50) / z99) * normal())

/**
 * Where the local call's own time goes:
 * - `inside` (the default): within the drawn latency — after the call, the wait is what is left of the draw since
 *   the first wait began (none when the local call took longer). The call, whatever ran on the thread meanwhile, is
 *   the remote side's work, which the figure already includes;
 * - `added`: on top of it — half the draw before the call and half after, in full (issue 22's prototype).
 * Set per run by the bench config's `FACTLINE_BENCH_LATENCY_LOCAL` (`BENCH_LATENCY_LOCAL`).
 */
export type Local = "inside" | "added"
let local: Local = "inside"
export const localOf = () => local

/**
 * Waits until `ms` from now. Waits begun in one synchronous run of code (the 16 shard appends a batch issues at once,
 * each waiting the first half of the same p50) that end in the same millisecond share one timer, so the calls
 * reach their bindings together, as they leave a Worker together in production. With a timer each, workerd ran
 * the calls one per timer, ≈ 1.3 ms of local scheduling apart: 16 appends took ≈ 27 ms where their 5 ms waits and
 * the 16 local calls issued at once took 10 (a bare workerd Worker and Durable Object, measured 2026-11-24), and
 * only the fan-outs paid it. Only one run of code shares — one request's: a timer belongs to the request that set it.
 */
let burst: Map<number, Array<() => void>> | undefined
const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    if (burst === undefined) {
      const mine = new Map<number, Array<() => void>>()
      burst = mine
      queueMicrotask(() => {
        if (burst === mine) burst = undefined
      })
    }
    const at = Math.ceil(performance.now() + ms)
    const waiting = burst.get(at)
    if (waiting) return void waiting.push(resolve)
    const list = [resolve]
    burst.set(at, list)
    setTimeout(() => {
      for (const wake of list) wake()
    }, Math.max(0, at - performance.now()))
  })

/** `call` with the operation's latency around it: half before, the rest after (`Local`). */
const around = async <A>(table: Readonly<Record<Operation, Figure>>, operation: Operation, call: () => Promise<A>): Promise<A> => {
  const ms = draw(table[operation])
  tally.calls[operation]++
  tally.drawnMs[operation] += ms
  const started = performance.now()
  if (inFlight.count[operation]++ === 0) {
    inFlight.started[operation] = started
    inFlight.drawnMax[operation] = 0
  }
  inFlight.drawnMax[operation] = Math.max(inFlight.drawnMax[operation], ms)
  try {
    await sleep(ms / 2)
    const result = await call()
    // performance.now() has moved: the local call returned through I/O.
    const left = local === "added" ? ms / 2 : ms - (performance.now() - started)
    if (left > 0) await sleep(left)
    return result
  } finally {
    // performance.now() advances across I/O in workerd: the two waits (overshoot included) and the real call between them.
    const ended = performance.now()
    tally.elapsedMs[operation] += ended - started
    if (--inFlight.count[operation] === 0) {
      tally.phases[operation]++
      tally.phaseMs[operation] += ended - inFlight.started[operation]
      tally.phaseDrawnMaxMs[operation] += inFlight.drawnMax[operation]
    }
  }
}

/**
 * A workflow step (`step.do`) under the profile: its callback (whose binding calls wait their own latency), then one
 * `workflow_step` draw — the engine persisting the step's result before the body goes on — on top, in full.
 * Without `FACTLINE_BENCH_LATENCY=production` the step alone.
 */
export const workflowStep = async <A>(source: Record<string, unknown>, step: () => Promise<A>): Promise<A> => {
  const result = await step()
  if (source.FACTLINE_BENCH_LATENCY !== "production") return result
  const ms = draw(production.workflow_step)
  const started = performance.now()
  tally.calls.workflow_step++
  tally.drawnMs.workflow_step += ms
  await sleep(ms)
  tally.elapsedMs.workflow_step += performance.now() - started
  return result
}

const bindIfFunction = (target: object, prop: PropertyKey) => {
  const value = (target as any)[prop]
  return typeof value === "function" ? value.bind(target) : value
}

/** Answered by the proxies: the real binding (so per-binding caches keyed on it see one binding). */
const unwrap = Symbol.for("@factline/core/testing/unwrap")

export const d1 = (db: D1Database, table = production): D1Database => {
  const real = new WeakMap<object, D1PreparedStatement>()
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...args: Array<unknown>) => wrap(target.bind(...args))
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") {
          return (...args: Array<any>) => around(table, "d1_round_trip", () => (target as any)[prop](...args))
        }
        return bindIfFunction(target, prop)
      }
    })
    real.set(proxy, statement)
    return proxy
  }
  return new Proxy(db, {
    get(target, prop) {
      if (prop === unwrap) return (target as any)[unwrap] ?? target
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql))
      if (prop === "batch") return (statements: Array<D1PreparedStatement>) => around(table, "d1_round_trip", () => target.batch(statements.map((s) => real.get(s) ?? s)))
      if (prop === "exec") return (sql: string) => around(table, "d1_round_trip", () => target.exec(sql))
      return bindIfFunction(target, prop)
    }
  })
}

export const durableObjects = <N extends { get(id: DurableObjectId): unknown }>(ns: N, table = production): N =>
  new Proxy(ns, {
    get(target, prop) {
      if (prop === unwrap) return (target as any)[unwrap] ?? target
      if (prop !== "get") return bindIfFunction(target, prop)
      return (id: DurableObjectId, options?: unknown) => {
        const stub = (target.get as any)(id, options)
        return new Proxy(stub, {
          get(s, method) {
            if (typeof method !== "string" || method === "then") return s[method]
            return (...args: Array<unknown>) => around(table, "do_rpc", () => s[method](...args))
          }
        })
      }
    }
  })

export const queue = <T>(q: Queue<T>, table = production): Queue<T> => ({
  send: (body: T, options?: QueueSendOptions) => around(table, "queue_send", () => q.send(body, options)),
  sendBatch: (messages: Iterable<MessageSendRequest<T>>, options?: QueueSendBatchOptions) => {
    const list = [...messages]
    return around(table, "queue_send", () => q.sendBatch(list, options))
  },
  metrics: () => (q as any).metrics(),
  [unwrap]: (q as any)[unwrap] ?? q
}) as Queue<T>

export const r2 = (bucket: R2Bucket, table = production): R2Bucket =>
  new Proxy(bucket, {
    get(target, prop) {
      if (prop === unwrap) return (target as any)[unwrap] ?? target
      if (prop === "get" || prop === "head") return (...args: Array<any>) => around(table, "r2_get", () => (target as any)[prop](...args))
      if (prop === "put" || prop === "delete") return (...args: Array<any>) => around(table, "r2_put", () => (target as any)[prop](...args))
      return bindIfFunction(target, prop)
    }
  })

const wrapped = new WeakMap<object, object>()
/**
 * A copy of a Worker env with the profile's latency around its D1 databases (`DB`, `FACTLINE_READ_DB_n`),
 * the ledger namespace (`LEDGER`), every queue producer (`*_QUEUE`, `*_QUEUE_n`, `*_DLQ`, the bench's
 * `BENCH_*`) and the payload bucket (`PAYLOADS`); the same copy for the same env (the platform keeps one
 * runtime per env object). Without `FACTLINE_BENCH_LATENCY=production` the env itself.
 */
export const env = <E extends Record<string, unknown>>(source: E): E => {
  if (source.FACTLINE_BENCH_LATENCY !== "production") return source
  if (source.FACTLINE_BENCH_LATENCY_SHAPE === "two-point") shape = "two-point"
  if (source.FACTLINE_BENCH_LATENCY_LOCAL === "added") local = "added"
  const known = wrapped.get(source)
  if (known) return known as E
  const out: Record<string, unknown> = { ...source }
  for (const [name, value] of Object.entries(source)) {
    if (typeof value !== "object" || value === null) continue
    if (name === "DB" || /^FACTLINE_READ_DB_\d+$/.test(name)) out[name] = d1(value as D1Database)
    else if (name === "LEDGER") out[name] = durableObjects(value as DurableObjectNamespace)
    else if (/_(QUEUE|DLQ)(_\d+)?$/.test(name) || /^BENCH_[A-Z_]+$/.test(name)) out[name] = queue(value as Queue)
    else if (name === "PAYLOADS") out[name] = r2(value as R2Bucket)
  }
  wrapped.set(source, out)
  return out as E
}

let fetchWrapped = false
let fetchPaused = 0
/** Runs `f` with the receiver POSTs' latency off (the per-stage budget measures CPU, never the profile). */
export const withoutFetchLatency = async <A>(f: () => Promise<A>): Promise<A> => {
  fetchPaused++
  try {
    return await f()
  } finally {
    fetchPaused--
  }
}
/**
 * Under the profile, the isolate's `fetch` waits `webhook_post` around every POST to the bench receiver's
 * `/hooks/` paths — factline's deliveries (WebhookTransport) and the bare POST floor alike; any other fetch is
 * left alone. Installed once per isolate; without `FACTLINE_BENCH_LATENCY=production` nothing changes.
 */
export const installFetch = (source: Record<string, unknown>, table = production) => {
  if (source.FACTLINE_BENCH_LATENCY !== "production" || fetchWrapped) return
  fetchWrapped = true
  const real = globalThis.fetch
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url
    return fetchPaused === 0 && new URL(url).pathname.startsWith("/hooks/") ? around(table, "webhook_post", () => real(input, init)) : real(input, init)
  }) as typeof fetch
}
