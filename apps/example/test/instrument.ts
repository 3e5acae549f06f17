/**
 * Counting wrappers around real bindings: the calls still go to the real local
 * D1 / Durable Objects, we only count the round trips they cost.
 */
export interface Counts {
  d1: number
  doRpc: number
  shards: Set<string>
}

export const countingD1 = (db: D1Database, counts: Counts): D1Database => {
  const real = new WeakMap<object, D1PreparedStatement>()
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...args: Array<unknown>) => wrap(target.bind(...args))
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") {
          return (...args: Array<unknown>) => {
            counts.d1++
            return (target as any)[prop](...args)
          }
        }
        const value = (target as any)[prop]
        return typeof value === "function" ? value.bind(target) : value
      }
    })
    real.set(proxy, statement)
    return proxy
  }
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql))
      if (prop === "batch") {
        return (statements: Array<D1PreparedStatement>) => {
          counts.d1++
          return target.batch(statements.map((s) => real.get(s) ?? s))
        }
      }
      if (prop === "exec") return (sql: string) => (counts.d1++, target.exec(sql))
      const value = (target as any)[prop]
      return typeof value === "function" ? value.bind(target) : value
    }
  })
}

export const countingNamespace = (ns: DurableObjectNamespace, counts: Counts): DurableObjectNamespace =>
  new Proxy(ns, {
    get(target, prop) {
      if (prop === "get") {
        return (id: DurableObjectId) => {
          const stub = target.get(id) as any
          return new Proxy(stub, {
            get(s, method) {
              if (typeof method !== "string" || method === "then") return s[method]
              return (...args: Array<unknown>) => {
                counts.doRpc++
                counts.shards.add(id.toString())
                return s[method](...args)
              }
            }
          })
        }
      }
      const value = (target as any)[prop]
      return typeof value === "function" ? value.bind(target) : value
    }
  })

export const newCounts = (): Counts => ({ d1: 0, doRpc: 0, shards: new Set() })

/**
 * The test MessageBatch of `createMessageBatch` records that a message was
 * retried but not the `delaySeconds` it was asked for; this wrapper records
 * the options too and forwards every call to the real message.
 */
export const recordingBatch = <B>(batch: MessageBatch<B>) => {
  const retries = new Map<string, QueueRetryOptions | undefined>()
  const messages = batch.messages.map((m) => ({
    get id() { return m.id },
    get timestamp() { return m.timestamp },
    get attempts() { return m.attempts },
    get body() { return m.body },
    ack: () => m.ack(),
    retry: (options?: QueueRetryOptions) => {
      retries.set(m.id, options)
      m.retry(options)
    }
  }))
  const recorded: MessageBatch<B> = {
    queue: batch.queue,
    metadata: (batch as any).metadata,
    messages: messages as unknown as ReadonlyArray<Message<B>>,
    ackAll: () => batch.ackAll(),
    retryAll: (options?: QueueRetryOptions) => batch.retryAll(options)
  } as MessageBatch<B>
  return { batch: recorded, retries }
}
