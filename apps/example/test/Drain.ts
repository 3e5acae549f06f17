/**
 * `drain()`: waits until every local queue is idle — every message sent has been delivered and settled
 * (acked, dead-lettered or dropped) — instead of a test polling stored state or sleeping through batch
 * timeouts.
 *
 * How it knows: `install(env)` wraps `send`/`sendBatch` of each queue producer binding object. Those
 * objects are shared by every env in the isolate (the test's `env`, the Worker's, the LedgerShard's and
 * spread copies of them), so every send counts, whoever makes it. `consumer(queue)` wraps the test Worker's
 * `queue` handler and settles each delivered message the way the local broker will: acked, or retried
 * (still in flight), or — retried on its last attempt — moved to its dead-letter queue (in flight there) or
 * dropped. A message retried with a delay stays in flight for the delay. The test runner and the Worker
 * share this module's state: the Worker's modules run in the runner's isolate with one module graph.
 *
 * It does not see work that is not a queue message: a LedgerShard alarm that will relay its outbox later
 * is not in flight until it sends. Tests waiting on alarms or retry delays still poll (`eventually`) or
 * run the alarm (`runDurableObjectAlarm`). Messages a test hands to `platform.queue` itself (with
 * `createMessageBatch`) never went through a queue; only what that call sends onward is counted.
 */
import { env as workerEnv } from "cloudflare:workers"

/** The consumer settings the local broker runs with (vitest.config.ts derives them from wrangler.jsonc). */
interface ConsumerSettings {
  readonly maxRetries: number
  readonly deadLetterQueue?: string | undefined
}

/** What happened on one queue since the tests started. */
export interface QueueTraffic {
  /** Sent and not yet settled (includes messages waiting for a retry or a delivery delay, and those being handled). */
  inFlight: number
  sent: number
  delivered: number
  acked: number
  retried: number
  deadLettered: number
  dropped: number
  /** Deliveries of messages this module never saw sent: it was installed too late, or a send bypassed it. */
  unaccounted: number
}

const traffic = new Map<string, QueueTraffic>()
let consumers: Readonly<Record<string, ConsumerSettings>> = {}
let installed = false

const of = (queue: string): QueueTraffic => {
  let t = traffic.get(queue)
  if (t === undefined) {
    t = { inFlight: 0, sent: 0, delivered: 0, acked: 0, retried: 0, deadLettered: 0, dropped: 0, unaccounted: 0 }
    traffic.set(queue, t)
  }
  return t
}

const counted = (queue: string, n: number) => {
  // The broker drops what is sent to a queue without a consumer: never delivered, never in flight.
  if (consumers[queue] === undefined) return
  of(queue).sent += n
  of(queue).inFlight += n
}

/**
 * Counts every send through the queue producer bindings of `env` (`TEST_QUEUE_PRODUCERS` maps binding
 * names to queue names, `TEST_QUEUE_CONSUMERS` holds the broker's consumer settings). Idempotent.
 */
export const install = (env: Record<string, unknown> = workerEnv as unknown as Record<string, unknown>) => {
  if (installed) return
  const producers = env.TEST_QUEUE_PRODUCERS as Record<string, string> | undefined
  const settings = env.TEST_QUEUE_CONSUMERS as Record<string, ConsumerSettings> | undefined
  if (producers === undefined || settings === undefined) throw new Error("Drain.install: TEST_QUEUE_PRODUCERS and TEST_QUEUE_CONSUMERS are not bound (see vitest.config.ts)")
  consumers = settings
  for (const [binding, queue] of Object.entries(producers)) {
    const producer = env[binding] as Queue | undefined
    if (producer === undefined) throw new Error(`Drain.install: no queue binding ${binding}`)
    const send = producer.send.bind(producer)
    const sendBatch = producer.sendBatch.bind(producer)
    // Counted before the send resolves (a delivery may settle first); uncounted again if the send fails.
    Object.assign(producer, {
      send: async (body: unknown, options?: QueueSendOptions) => {
        counted(queue, 1)
        try {
          return await send(body, options)
        } catch (error) {
          counted(queue, -1)
          throw error
        }
      },
      sendBatch: async (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
        const list = [...messages]
        counted(queue, list.length)
        try {
          return await sendBatch(list, options)
        } catch (error) {
          counted(queue, -list.length)
          throw error
        }
      }
    })
  }
  installed = true
}

type QueueHandler<E> = (batch: MessageBatch<unknown>, env: E, ctx: ExecutionContext) => Promise<void>

/**
 * Wraps a Worker's `queue` handler: records each message's ack/retry (first call wins, as in workerd) and,
 * once the handler is done, settles the batch as the broker will.
 */
export const consumer = <E>(queue: QueueHandler<E>): QueueHandler<E> =>
  async function drainedQueue(batch, env, ctx) {
    install()
    let batchCall: "ackAll" | "retryAll" | undefined
    const calls = new Map<string, "ack" | "retry">()
    const call = (id: string, what: "ack" | "retry") => {
      if (batchCall === undefined && !calls.has(id)) calls.set(id, what)
    }
    const messages = batch.messages.map((m) =>
      new Proxy(m, {
        get(target, prop) {
          if (prop === "ack") return () => (call(target.id, "ack"), target.ack())
          if (prop === "retry") return (options?: QueueRetryOptions) => (call(target.id, "retry"), target.retry(options))
          const value = Reflect.get(target, prop, target)
          return typeof value === "function" ? value.bind(target) : value
        }
      })
    )
    const watched = new Proxy(batch, {
      get(target, prop) {
        if (prop === "messages") return messages
        if (prop === "ackAll") return () => (batchCall ??= "ackAll", target.ackAll())
        if (prop === "retryAll") return (options?: QueueRetryOptions) => (batchCall ??= "retryAll", target.retryAll(options))
        const value = Reflect.get(target, prop, target)
        return typeof value === "function" ? value.bind(target) : value
      }
    })
    let threw = false
    try {
      await queue(watched, env, ctx)
    } catch (error) {
      threw = true
      throw error
    } finally {
      settle(batch, (m) => threw || batchCall === "retryAll" || calls.get(m.id) === "retry")
    }
  }

const settle = (batch: MessageBatch<unknown>, retried: (m: Message<unknown>) => boolean) => {
  const t = of(batch.queue)
  const settings = consumers[batch.queue]
  for (const m of batch.messages) {
    t.delivered++
    if (!retried(m)) {
      t.acked++
      leave(t)
    } else if (settings !== undefined && m.attempts >= settings.maxRetries + 1) {
      // The broker's own dead-lettering: the retry of a last attempt.
      leave(t)
      if (settings.deadLetterQueue !== undefined) {
        t.deadLettered++
        counted(settings.deadLetterQueue, 1)
      } else t.dropped++
    } else t.retried++ // redelivered later: still in flight
  }
}

const leave = (t: QueueTraffic) => {
  if (t.inFlight > 0) t.inFlight--
  else t.unaccounted++
}

/** A copy of every queue's traffic so far. */
export const snapshot = (): Record<string, QueueTraffic> => Object.fromEntries([...traffic].map(([queue, t]) => [queue, { ...t }]))

const busy = () => [...traffic].filter(([, t]) => t.inFlight > 0 || t.unaccounted > 0)

const report = (entries: ReadonlyArray<[string, QueueTraffic]>) =>
  entries.map(([queue, t]) => `${queue}: ${t.inFlight} in flight (sent ${t.sent}, delivered ${t.delivered}, acked ${t.acked}, retried ${t.retried}, dead-lettered ${t.deadLettered}${t.unaccounted > 0 ? `, ${t.unaccounted} delivered but never counted as sent` : ""})`).join("; ")

/** The local broker's backlog per queue: messages waiting for their batch (not those delayed or being handled). */
const backlogs = async () => {
  const producers = (workerEnv as unknown as Record<string, unknown>).TEST_QUEUE_PRODUCERS as Record<string, string>
  const env = workerEnv as unknown as Record<string, Queue>
  const entries = await Promise.all(Object.entries(producers).map(async ([binding, queue]) => [queue, (await env[binding]!.metrics()).backlogCount] as const))
  return entries.filter(([, n]) => n > 0)
}

export interface DrainOptions {
  /** Give up (and name the busy queues) after this long. Default 30 s. */
  readonly timeoutMs?: number
  /**
   * How long every queue must stay idle before `drain` returns. Default 20 ms. Counted work cannot restart
   * an idle queue (sends are counted when called, settles when the handler is done); this only guards
   * against work the code under test leaves running after its handler returned.
   */
  readonly quietMs?: number
}

/**
 * Resolves once every queue is idle — nothing in flight by the counts and no backlog in the broker — and
 * has stayed idle for `quietMs`. Rejects after `timeoutMs` naming each busy queue and its counts.
 */
export const drain = async (options: DrainOptions = {}): Promise<void> => {
  install()
  const timeoutMs = options.timeoutMs ?? 30_000
  const quietMs = options.quietMs ?? 20
  const start = Date.now()
  let idleSince: number | undefined
  for (;;) {
    const waiting = busy()
    const backlog = waiting.length === 0 ? await backlogs() : []
    // A delivery never counted as sent means the counts cannot be trusted: say so rather than wait or pass.
    if (waiting.some(([, t]) => t.unaccounted > 0)) throw new Error(`drain: counts broken (a send before Drain.install or around the wrapped bindings) — ${report(waiting)}`)
    if (waiting.length === 0 && backlog.length === 0) {
      idleSince ??= Date.now()
      if (Date.now() - idleSince >= quietMs) return
    } else idleSince = undefined
    if (Date.now() - start > timeoutMs) {
      const broker = backlog.map(([queue, n]) => `${queue}: ${n} in the broker's backlog but none counted in flight`).join("; ")
      throw new Error(`drain: not idle after ${timeoutMs} ms — ${report(waiting) || broker}`)
    }
    await new Promise((r) => setTimeout(r, 10))
  }
}
