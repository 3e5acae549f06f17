/**
 * `BENCH_CPU_PROFILE=1 npm run bench`: a V8 CPU profile of the Worker's isolate — the HTTP edge, the consumers and
 * the LedgerShard objects; not the local broker's or D1's own isolates — while the first end-to-end run is under way,
 * through the inspector `wrangler dev` serves (LocalStack.start's `inspectorPort`). Written to bench/out/end-to-end.cpuprofile (open it in
 * Chrome DevTools' Performance panel or any .cpuprofile viewer); the functions with the most samples of their own
 * are printed. With BENCH_MINIFY=0 the Worker is bundled unminified, so the profile names functions and lines.
 */
import { readFileSync, writeFileSync } from "node:fs"
import WebSocket from "ws"

/** Starts profiling the Worker's isolate; `stop()` writes the profile and returns its top functions. */
export const start = async ({ port = 9229, intervalMicros = 200, bundle } = {}) => {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json()
  const target = targets[0]
  if (!target) throw new Error(`no inspector target on port ${port}`)
  // wrangler's inspector proxy accepts the devtools' origin.
  const ws = new WebSocket(target.webSocketDebuggerUrl, { headers: { origin: "https://devtools.devprod.cloudflare.dev" } })
  await new Promise((resolve, reject) => { ws.once("open", resolve); ws.once("error", reject) })
  let id = 0
  const pending = new Map()
  ws.on("message", (data) => {
    const message = JSON.parse(String(data))
    if (message.id !== undefined && pending.has(message.id)) {
      pending.get(message.id)(message)
      pending.delete(message.id)
    }
  })
  const send = (method, params = {}) => new Promise((resolve) => {
    const i = ++id
    pending.set(i, resolve)
    ws.send(JSON.stringify({ id: i, method, params }))
  })
  await send("Profiler.enable")
  await send("Profiler.setSamplingInterval", { interval: intervalMicros })
  await send("Profiler.start")
  return {
    stop: async (file, top = 25) => {
      const { result } = await send("Profiler.stop")
      ws.close()
      writeFileSync(file, JSON.stringify(result.profile))
      return summary(result.profile, bundle, top)
    }
  }
}

/** The functions with the most samples of their own, with their share and a glimpse of their source line. */
const summary = (profile, bundle, top) => {
  const lines = bundle ? readFileSync(bundle, "utf8").split("\n") : []
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map()
  for (const sample of profile.samples) {
    const { functionName, url, lineNumber, columnNumber } = nodes.get(sample).callFrame
    const source = url.endsWith(".js") && lines[lineNumber] !== undefined ? lines[lineNumber].slice(Math.max(0, columnNumber - 8), columnNumber + 80).trim() : url
    const key = `${functionName || "(anonymous)"} ${lineNumber + 1}:${columnNumber + 1} ${source}`
    self.set(key, (self.get(key) ?? 0) + 1)
  }
  return [...self].sort((a, b) => b[1] - a[1]).slice(0, top).map(([key, n]) => `${(100 * n / profile.samples.length).toFixed(1).padStart(5)} %  ${key}`)
}
