#!/usr/bin/env node
/**
 * `npm run dev`'s last step: `wrangler dev` with the arguments given (`npm run dev -- --port 8795`), unminified
 * (`--minify=false`, whatever wrangler.jsonc says for deploys: a defect's stack names functions and lines the
 * source map beside the bundle resolves — `factline dlq show` prints them as `src/…:line`), plus
 * `FACTLINE_KEEP_ACCEPTED=10m` (accepted events kept in R2 for 10 minutes, so `factline recover` can re-send
 * what a restart of the local queues lost), and, once it serves, the start-up check (StartupCheck.mjs): how
 * many facts of the last 10 minutes may not have reached their queues, and the command that recovers them; then
 * the projections' catch-up check, which the cron would run in a deployment (a projection new since the last
 * start replays the ledger by itself). The crm module's CRM (its crm-sync workflow writes contacts, deals and
 * notes there) is the local stand-in, scripts/CrmReceiver.mjs, started here on a free port and passed as
 * `CRM_URL` — unless `CRM_URL` is set in the environment (then that CRM is used).
 * Wrangler's own output is passed through untouched; stopping this stops wrangler.
 */
import { spawn } from "node:child_process"
import * as CrmReceiver from "./CrmReceiver.mjs"
import { catchUp, check, keepAccepted } from "./StartupCheck.mjs"

const args = process.argv.slice(2)
const portArg = args.indexOf("--port")
const port = portArg >= 0 ? Number(args[portArg + 1]) : Number(args.find((a) => a.startsWith("--port="))?.slice(7) ?? 8787)
const crmUrl = process.env.CRM_URL || (await CrmReceiver.start()).url
const dev = spawn("wrangler", ["dev", "--minify=false", "--var", `FACTLINE_KEEP_ACCEPTED:${keepAccepted}`, "--var", `CRM_URL:${crmUrl}`, ...args], { stdio: "inherit", env: process.env })
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => dev.kill(signal))
dev.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)))

console.log(`factline: accepted events are kept ${keepAccepted} (FACTLINE_KEEP_ACCEPTED) — the local queues keep nothing across a restart; \`factline recover\` re-sends what they lost (docs/operating.md#after-a-restart)`)
console.log(`factline: the crm module's CRM is ${process.env.CRM_URL ? "CRM_URL" : "the local stand-in (scripts/CrmReceiver.mjs)"} at ${crmUrl} (GET ${crmUrl}/state?call_id=… shows what a call's crm-sync did there)`)
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
