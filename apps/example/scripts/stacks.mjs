#!/usr/bin/env node
// The example's black-box runs against real local stacks, the last part of its `npm test`: the operations run
// (browser.mjs: the dashboard in Chromium and the CLI) in one lane, and smoke, restart, workflow-restart, contract
// and interop one after another in the other, each run on its own stack (a fresh state directory, a free port and
// inspector port). Most of each run's time is waiting on its stack's queues (their batch timeouts, a restart, a
// rebuild's steps), so the two lanes share the two cores: about 4 minutes instead of about 7 one after another.
//
// The static assets are built once, here, before any stack starts (LocalStack.start would rebuild them, swapping the
// directory the other lane's stack serves). Each run's output is printed whole when it ends, under its name and
// time, so its lines stay together (and `<name>: N passed, M failed`, which .ci/run sums, is printed as the run
// printed it). Every run runs even when one fails; exits non-zero when any did.
//
//   node scripts/stacks.mjs                 every run, in the two lanes
//   node scripts/stacks.mjs smoke interop   only these, one lane each in turn (a lane per name, two at a time)
import { spawn } from "node:child_process"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { build as buildAssets } from "../../../packages/workers/dashboard/build.mjs"
import { assetsBuilt } from "./LocalStack.mjs"

const here = dirname(fileURLToPath(import.meta.url))
// The operations run is the longest (about 3 minutes); the five others together take about as long.
const everyLane = [["browser"], ["smoke", "restart", "workflow-restart", "contract", "interop"]]
const known = everyLane.flat()
const names = process.argv.slice(2)
for (const name of names) {
  if (!known.includes(name)) {
    console.error(`stacks: unknown run "${name}"; the runs are ${known.join(", ")}`)
    process.exit(2)
  }
}
const lanes = names.length === 0 ? everyLane : names.map((name) => [name])

const started = Date.now()
const seconds = (from) => ((Date.now() - from) / 1_000).toFixed(1)

/** Runs one script to its end; resolves to whether it exited 0, after printing its output whole. */
const run = (name) =>
  new Promise((resolve) => {
    const began = Date.now()
    const child = spawn(process.execPath, [join(here, `${name}.mjs`)], {
      cwd: join(here, ".."),
      env: { ...process.env, [assetsBuilt]: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const chunks = []
    child.stdout.on("data", (d) => chunks.push(d))
    child.stderr.on("data", (d) => chunks.push(d))
    child.once("error", (error) => chunks.push(Buffer.from(`${error.stack ?? error}\n`)))
    child.once("close", (code, signal) => {
      const ok = code === 0
      process.stdout.write(`\n▶ ${name} (${seconds(began)} s, ended ${seconds(started)} s in)${ok ? "" : ` — exited ${code ?? signal}`}\n`)
      process.stdout.write(Buffer.concat(chunks))
      resolve(ok)
    })
  })

await buildAssets()
const pending = [...lanes]
const results = []
/** A lane takes the next list of runs and runs them in turn; two lanes at a time. */
const lane = async () => {
  for (let next = pending.shift(); next !== undefined; next = pending.shift()) {
    for (const name of next) results.push({ name, ok: await run(name) })
  }
}
await Promise.all([lane(), lane()])
const failed = results.filter((r) => !r.ok).map((r) => r.name)
console.log(`\nstacks: ${results.length - failed.length} of ${results.length} runs ended well in ${seconds(started)} s${failed.length === 0 ? "" : `; failed: ${failed.join(", ")}`}`)
process.exit(failed.length === 0 ? 0 : 1)
