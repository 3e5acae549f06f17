#!/usr/bin/env node
// `npm run chaos`: runs the heavier fault cases in workerd (vitest.chaos.config.ts) and prints the scorecard
// from the `SCORECARD` lines they print. Exits non-zero if any case failed.
import { spawnSync } from "node:child_process"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const app = join(dirname(fileURLToPath(import.meta.url)), "..")
const vitest = join(app, "..", "..", "node_modules", "vitest", "vitest.mjs")
const run = spawnSync(process.execPath, [vitest, "run", "--config", "vitest.chaos.config.ts"], { cwd: app, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
const output = `${run.stdout}\n${run.stderr}`
const cases = [...output.matchAll(/SCORECARD (\{.*\})/g)].map((m) => JSON.parse(m[1]))
const sum = (field) => cases.reduce((n, c) => n + (c[field] ?? 0), 0)
console.log(`\nchaos scorecard — ${new Date().toISOString()}\n`)
console.log(["case", "passed", "sent", "facts exp/found", "duplicates", "lost", "DLQ exp/found"].map((h, i) => h.padEnd([42, 8, 8, 17, 12, 6, 14][i])).join(""))
for (const c of cases) {
  console.log([c.case, c.passed ? "yes" : "NO", c.messages_sent, `${c.facts_expected}/${c.facts_found}`, c.duplicates_found, c.messages_lost, `${c.dlq_expected}/${c.dlq_found}`]
    .map((v, i) => String(v).padEnd([42, 8, 8, 17, 12, 6, 14][i])).join(""))
}
const passed = cases.filter((c) => c.passed).length
console.log(`\ncases run ${cases.length}, passed ${passed}; messages sent ${sum("messages_sent")}; facts expected ${sum("facts_expected")}, found ${sum("facts_found")}; duplicates found ${sum("duplicates_found")}; messages lost ${sum("messages_lost")}; DLQ records expected ${sum("dlq_expected")}, found ${sum("dlq_found")}`)
if (run.status !== 0 || passed !== cases.length || cases.length === 0) {
  console.log(output.split("\n").filter((l) => /FAIL|×|Error/.test(l)).slice(0, 20).join("\n"))
  process.exit(1)
}
