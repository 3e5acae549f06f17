#!/usr/bin/env node
/**
 * `npm run dev`'s last step: `wrangler dev` with the arguments given (`npm run dev -- --port 8795`), unminified
 * (`--minify=false`, whatever wrangler.jsonc says for deploys: a defect's stack names functions and lines the
 * source map beside the bundle resolves — `factline dlq show` prints them as `src/…:line`), plus
 * `FACTLINE_KEEP_ACCEPTED=10m` (accepted events kept in R2 for 10 minutes, so `factline recover` can re-send
 * what a restart of the local queues lost), and, once it serves, the start-up check (StartupCheck.mjs): how
 * many facts of the last 10 minutes may not have reached their queues, and the command that recovers them; then
 * the projections' catch-up check, which the cron would run in a deployment (a projection new since the last
 * start replays the ledger by itself).
 * Wrangler's own output is passed through untouched; stopping this stops wrangler.
 */
import { spawn } from "node:child_process"
import { catchUp, check, keepAccepted } from "./StartupCheck.mjs"

const args = process.argv.slice(2)
const portArg = args.indexOf("--port")
const port = portArg >= 0 ? Number(args[portArg + 1]) : Number(args.find((a) => a.startsWith("--port="))?.slice(7) ?? 8787)
const dev = spawn("wrangler", ["dev", "--minify=false", "--var", `FACTLINE_KEEP_ACCEPTED:${keepAccepted}`, ...args], { stdio: "inherit", env: process.env })
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => dev.kill(signal))
dev.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)))

console.log(`factline: accepted events are kept ${keepAccepted} (FACTLINE_KEEP_ACCEPTED) — the local queues keep nothing across a restart; \`factline recover\` re-sends what they lost (docs/operating.md#after-a-restart)`)
// Waits for the server, then says what a restart may have lost.
for (let i = 0; i < 600 && dev.exitCode === null; i++) {
  try {
    const response = await fetch(`http://localhost:${port}/health`)
    if (response.ok) {
      const { lines } = await check(`http://localhost:${port}`)
      for (const line of lines) console.log(line)
      for (const line of await catchUp(`http://localhost:${port}`)) console.log(line)
      break
    }
  } catch {}
  await new Promise((resolve) => setTimeout(resolve, 500))
}
