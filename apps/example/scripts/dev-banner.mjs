#!/usr/bin/env node
/**
 * What `npm run dev` prints before wrangler starts: the development-only settings `.dev.vars` gives the local
 * stack (retry delay scale, which attempts the runs view records), read from the file itself so the banner
 * says what the stack will run with. Production is unchanged: `wrangler deploy` never reads `.dev.vars`.
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"

const file = join(process.argv[2] ?? process.cwd(), ".dev.vars")
const vars = Object.fromEntries((existsSync(file) ? readFileSync(file, "utf8") : "").split("\n")
  .map((line) => /^([A-Z0-9_]+)\s*=\s*['"]?(.*?)['"]?\s*$/.exec(line))
  .filter((m) => m !== null)
  .map((m) => [m[1], m[2]]))
const scale = vars.FACTLINE_RETRY_DELAY_SCALE
const runs = vars.FACTLINE_RUNS ?? "failures"
console.log(scale === undefined || scale === "1"
  ? "retries: production delays (set FACTLINE_RETRY_DELAY_SCALE in .dev.vars for development speed)"
  : `retries: development scale ${scale} (production unchanged)`)
console.log(`runs: recording ${runs === "all" ? "every attempt" : runs === "none" ? "nothing" : "failing attempts"} — factline runs --follow, or the dashboard's Runs panel`)
