/**
 * `npm run -s bench:profile`: where the events stage's CPU goes per batch of 100, step by step, in plain
 * Node on the in-memory platform (TestPlatform: the same consumer code, SQLite in memory for D1 and the
 * ledger shards, queues that record). It times, per batch of 100 fresh events (median of BENCH_PROFILE_BATCHES,
 * default 30, after 10 to warm up): the whole consumer call (`EventsConsumer.consume`) at each log setting,
 * and on their own its steps — decode (envelope, registry route, payload hash), key binding (the
 * `accepted_keys` claim), dispatch (handlers, fact ids, ledger append, relay), the metrics rollup, the
 * per-attempt log lines (with their trace fields) and the batch line. Bindings here are in-memory, not
 * workerd's: the figures are the framework's own CPU, the part a faster binding cannot remove.
 */
import { Effect } from "effect"
import { Consumer, EventsConsumer, Metrics } from "@factline/core/runtime"
import * as TestPlatform from "../packages/core/src/testing/TestPlatform.js"
import { modules } from "../apps/example/src/modules.js"

const batches = Number(process.env.BENCH_PROFILE_BATCHES ?? "30")
const warm = 10
const platform = TestPlatform.make(modules, { shardsPerTenant: 16, settings: { FACTLINE_LEDGER_SHARDS: "16" } })

let seq = 0
const event = (run: string, i: number) => {
  const call_id = `${run}_c${i}`
  return {
    schema_version: 2, message_type: "call.completed", idempotency_key: `call.completed:${call_id}`, tenant_id: "tenant-a", subject: call_id,
    source: "bench", message_id: `m_${call_id}`, correlation_id: call_id, created_at: new Date().toISOString(),
    traceparent: `00-${(seq + 1).toString(16).padStart(32, "0")}-${(i + 1).toString(16).padStart(16, "0")}-01`,
    payload: { call_id, buyer_id: `${run}_b${i % 50}`, duration_s: (i * 37) % 180, price_cents: 100 + ((i * 53) % 900), currency: "USD" }
  }
}
const batchOf = (): MessageBatch<unknown> => {
  const run = `p${seq++}`
  const messages = Array.from({ length: 100 }, (_, i) => ({ id: `${run}-${i}`, timestamp: new Date(), attempts: 1, body: event(run, i), ack: () => undefined, retry: () => undefined }))
  return { queue: "factline-events", messages, metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } }, ackAll: () => undefined, retryAll: () => undefined } as unknown as MessageBatch<unknown>
}

const median = (xs: Array<number>) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const time = async (label: string, step: (batch: MessageBatch<unknown>) => Promise<unknown>) => {
  const ms: Array<number> = []
  for (let i = 0; i < warm + batches; i++) {
    const batch = batchOf()
    const started = performance.now()
    await step(batch)
    if (i >= warm) ms.push(performance.now() - started)
  }
  return { step: label, ms_per_batch_of_100: Number(median(ms).toFixed(2)) }
}

// Log lines go nowhere (their cost is building them; Workers Logs' own cost is not the consumer's CPU).
const silence = <A>(f: () => Promise<A>) => async () => {
  const saved = [console.log, console.warn, console.error]
  console.log = console.warn = console.error = () => undefined
  try {
    return await f()
  } finally {
    ;[console.log, console.warn, console.error] = saved
  }
}

const decodeAll = (batch: MessageBatch<unknown>) =>
  Effect.forEach(batch.messages, (m) => EventsConsumer.decode(m.body), { concurrency: 16 })

const rows: Array<{ step: string; ms_per_batch_of_100: number }> = []
for (const log of ["all", "batch", "failures"] as const) {
  rows.push(await time(`whole consumer call, log "${log}" (+ metrics rollup)`, (batch) => silence(() =>
    platform.run(Effect.gen(function*() {
      const counts = yield* EventsConsumer.consume(batch, { log, delayScale: 0 })
      yield* Metrics.record(Metrics.sampleOf(batch, counts, 1, Date.now()))
    })))()))
}
rows.push(await time("decode (envelope, route, payload hash)", (batch) => platform.run(decodeAll(batch))))
rows.push(await time("decode + key binding (accepted_keys claim)", (batch) =>
  platform.run(Effect.flatMap(decodeAll(batch), (items) => EventsConsumer.process(items.flat().map((i) => ({ key: i.key, value: { ...i.value, routed: { ...i.value.routed, handler: { _tag: "none" } } } as never })))))))
rows.push(await time("decode + key binding + dispatch (handlers, fact ids, append, relay)", (batch) =>
  platform.run(Effect.flatMap(decodeAll(batch), (items) => EventsConsumer.process(items.flat())))))
rows.push(await time("metrics rollup (one upsert)", (batch) => platform.run(Metrics.record(Metrics.sampleOf(batch, { acked: 100 }, 1, Date.now())))))
const fields = Consumer.queueFields("factline-events")
rows.push(await time("100 per-attempt log lines (JSON, trace fields)", async (batch) => {
  let n = 0
  for (const m of batch.messages) n += Consumer.attemptLine(fields, m, "acked").length
  return n
}))
console.log(JSON.stringify({ batches, rows }, null, 1))
