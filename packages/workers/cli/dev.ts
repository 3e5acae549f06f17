/**
 * `factline dev [wrangler dev options]` (an app's `npm run dev`): the local stack, refusing a program that does
 * not typecheck. In order: `tsc --noEmit` (a type error is printed and nothing starts: exit 1 — the compile-time
 * guarantees of definitions, services and handler answers hold only in a program that compiles); the D1
 * migrations applied locally; the development banner (what `.dev.vars` gives the stack: retry scale, runs
 * recorded, the local tokens and the dashboard); then `wrangler dev`, unminified (`--minify=false`: a defect's
 * stack names functions and lines a source map resolves — `factline dlq show` prints them as `src/…:line`) and
 * with `FACTLINE_KEEP_ACCEPTED=10m`; once it serves, the start-up check (what a restart of the local queues may
 * have lost, and the command that recovers it) and the projections' catch-up check the cron would run in a
 * deployment. Both take the platform token `.dev.vars` names (`factline init` writes one).
 *
 * Wrangler's own output passes through untouched; stopping this stops wrangler. It recovers nothing by itself.
 */
import { spawn, spawnSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"

/** How long `factline dev` keeps accepted events (FACTLINE_KEEP_ACCEPTED). */
export const keepAccepted = "10m"

export const usage = `usage: factline dev [wrangler dev options]   (npm run dev -- --port 8795)

  typechecks the app (tsc --noEmit; a type error stops it), applies the D1 migrations locally, prints what
  .dev.vars gives the local stack, then runs wrangler dev (unminified, accepted events kept ${keepAccepted}) and,
  once it serves, checks what a restart may have lost and the projections' catch-up`

/** What `.dev.vars` holds: its variables, and the tokens named in its comments (`# Your <name> token (…): fl_…`). */
export interface DevVars {
  readonly vars: Readonly<Record<string, string>>
  readonly tokens: ReadonlyArray<{ readonly name: string; readonly about: string; readonly token: string }>
}

export const readDevVars = (dir: string): DevVars => {
  const file = join(dir, ".dev.vars")
  const text = existsSync(file) ? readFileSync(file, "utf8") : ""
  const vars = Object.fromEntries(text.split("\n")
    .map((line) => /^([A-Z0-9_]+)\s*=\s*['"]?(.*?)['"]?\s*$/.exec(line))
    .filter((m) => m !== null)
    .map((m) => [m[1]!, m[2]!]))
  const tokens = [...text.matchAll(/^# Your (\w+) token \((.*)\): (fl_[0-9A-Za-z]{43})$/gm)].map((m) => ({ name: m[1]!, about: m[2]!, token: m[3]! }))
  return { vars, tokens }
}

/** The banner's lines: the development-only settings the stack runs with, the tokens, the dashboard. */
export const banner = ({ vars, tokens }: DevVars, port: number): Array<string> => {
  const scale = vars.FACTLINE_RETRY_DELAY_SCALE
  const runs = vars.FACTLINE_RUNS ?? "failures"
  const platform = tokens.find((t) => t.name === "platform")
  return [
    scale === undefined || scale === "1"
      ? "retries: production delays (set FACTLINE_RETRY_DELAY_SCALE in .dev.vars for development speed)"
      : `retries: development scale ${scale} (production unchanged)`,
    `runs: recording ${runs === "all" ? "every attempt" : runs === "none" ? "nothing" : "failing attempts"} — npx factline runs --follow, or the dashboard's Runs panel`,
    `factline: accepted events are kept ${keepAccepted} (FACTLINE_KEEP_ACCEPTED) — the local queues keep nothing across a restart; \`npx factline recover\` re-sends what they lost`,
    ...tokens.map((t) => `token ${t.name} (${t.about}): ${t.token}`),
    platform === undefined
      ? `dashboard: http://localhost:${port}/dashboard — with a platform token (.dev.vars has none: npm run tokens -- create --tenant factline --scopes platform --name platform --file .dev.vars, then add it as "# Your platform token (tenant factline; platform): fl_…")`
      : `dashboard: http://localhost:${port}/dashboard — log in with the platform token`
  ]
}

/** The start-up check's lines: a dry run of `POST /v1/recover` over the last 10 minutes (every page). */
export const recoverCheck = async (base: string, token: string): Promise<Array<string>> => {
  const since = new Date(Date.now() - 10 * 60_000).toISOString()
  const call = (cursor?: string) => fetch(`${base}/v1/recover`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ since, dry_run: true, ...(cursor === undefined ? {} : { cursor }) })
  })
  let response = await call()
  if (!response.ok) return [`factline: could not check for work lost in a restart (${response.status} ${await response.text()})`]
  type Report = { facts: number; events: { resent?: number } | null; next_cursor?: string | null }
  let report = (await response.json()) as Report
  let facts = report.facts
  const events = report.events
  while (report.next_cursor) {
    response = await call(report.next_cursor)
    if (!response.ok) break
    report = (await response.json()) as Report
    facts += report.facts
  }
  const command = `npx factline recover --since ${keepAccepted} --token ${token}`
  const lines: Array<string> = []
  if (facts > 0) lines.push(`factline: ${facts} facts appended in the last 10 min may not have reached their queues — run \`${command}\``)
  if ((events?.resent ?? 0) > 0) lines.push(`factline: ${events!.resent} accepted events of the last 10 min have no fact yet (kept by FACTLINE_KEEP_ACCEPTED) — the same command sends them again`)
  if (lines.length === 0) lines.push("factline: no facts appended in the last 10 min: nothing a restart could have lost")
  return lines
}

/** The projections' catch-up check (`POST /v1/projections/catch-up`): `wrangler dev` never fires the cron that runs it. */
export const catchUpCheck = async (base: string, token: string): Promise<Array<string>> => {
  const response = await fetch(`${base}/v1/projections/catch-up`, { method: "POST", headers: { authorization: `Bearer ${token}` } })
  if (!response.ok) return [`factline: could not check the projections' catch-up (${response.status} ${await response.text()})`]
  const { steps } = (await response.json()) as { steps: Array<{ projection: string; action: string; detail?: string; batch_id?: string }> }
  const said = steps.filter((s) => s.action !== "current")
  if (said.length === 0) return [`factline: every projection is current (${steps.length})`]
  return said.map((s) =>
    s.action === "not_migrated" ? `factline: projection ${s.projection} is not migrated — ${s.detail ?? "apply its migration"}`
      : `factline: projection ${s.projection}: catch-up ${s.action}${s.batch_id ? ` (${s.batch_id}; follow it with \`npx factline projections\`)` : ""}`)
}

/** A tool of the app (`node_modules/.bin`), else from PATH. */
const bin = (dir: string, name: string) => {
  const local = join(dir, "node_modules", ".bin", name)
  return existsSync(local) ? local : name
}

export const run = async (argv: ReadonlyArray<string>): Promise<number> => {
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(usage)
    return 0
  }
  const dir = process.cwd()
  const typecheck = spawnSync(bin(dir, "tsc"), ["--noEmit"], { cwd: dir, stdio: "inherit" })
  if (typecheck.status !== 0) {
    console.error(`\nfactline dev: the app does not typecheck (tsc --noEmit${typecheck.error ? `: ${typecheck.error.message}` : ", above"}); nothing started — fix it and run npm run dev again`)
    return 1
  }
  console.log("factline dev: the app typechecks (tsc --noEmit)")
  const migrate = spawnSync(bin(dir, "wrangler"), ["d1", "migrations", "apply", "DB", "--local"], { cwd: dir, stdio: "inherit", env: { ...process.env, CI: "true" } })
  if (migrate.status !== 0) {
    console.error("\nfactline dev: the local D1 migrations did not apply (above); nothing started")
    return 1
  }
  const portArg = argv.indexOf("--port")
  const port = portArg >= 0 ? Number(argv[portArg + 1]) : Number(argv.find((a) => a.startsWith("--port="))?.slice(7) ?? 8787)
  const devVars = readDevVars(dir)
  for (const line of banner(devVars, port)) console.log(line)

  const dev = spawn(bin(dir, "wrangler"), ["dev", "--minify=false", "--var", `FACTLINE_KEEP_ACCEPTED:${keepAccepted}`, ...argv], { cwd: dir, stdio: "inherit", env: process.env })
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => dev.kill(signal))
  const exited = new Promise<number>((resolve) => dev.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0))))

  const platform = devVars.tokens.find((t) => t.name === "platform")?.token
  // Waits for the server, then says what a restart may have lost and what the catch-up started.
  for (let i = 0; i < 600 && dev.exitCode === null; i++) {
    try {
      const response = await fetch(`http://localhost:${port}/health`)
      if (response.ok) {
        if (platform === undefined) console.log("factline: no platform token in .dev.vars: the start-up and catch-up checks are skipped")
        else for (const line of [...await recoverCheck(`http://localhost:${port}`, platform), ...await catchUpCheck(`http://localhost:${port}`, platform)]) console.log(line)
        break
      }
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  return exited
}
