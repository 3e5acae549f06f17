/**
 * The real local stack, started from a script: applies the D1 migrations (a fresh state: a copy of one migrated
 * once, `migrate` below) and runs
 * `wrangler dev` (local Queues, D1, Durable Objects, R2) on a given state directory
 * and port, then waits until it serves. Used by the black-box runs (smoke, contract, interop, browser) and
 * the benchmark; `checks` is the harness of the first three.
 */
import * as CrmReceiver from "./CrmReceiver.mjs"
import { execFileSync, spawn } from "node:child_process"
import { createHash } from "node:crypto"
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { dirname, isAbsolute, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { build as buildAssets } from "../../../packages/workers/dashboard/build.mjs"

/** The example app (where wrangler.jsonc is). */
export const app = join(dirname(fileURLToPath(import.meta.url)), "..")
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

export const wrangler = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "node_modules", "wrangler", "bin", "wrangler.js")
/**
 * Non-interactive (no migration prompt), no telemetry; @factline/* bundled from their TypeScript sources
 * (the exports maps' `@factline/source` condition: the workspace has no dist/ to build first).
 */
export const env = { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", WRANGLER_BUILD_CONDITIONS: "@factline/source,workerd,worker,browser" }

export const freePort = () =>
  new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

/** Set to "1" in the environment of a run whose caller built the static assets already (scripts/stacks.mjs). */
export const assetsBuilt = "FACTLINE_ASSETS_BUILT"

/** The wrangler package's version: part of a migrated state's key (another wrangler may lay its files out differently). */
const wranglerVersion = JSON.parse(readFileSync(join(dirname(wrangler), "..", "package.json"), "utf8")).version

/**
 * Applies every database's migrations to `state` with `wrangler d1 migrations apply --local`. A fresh state (a new,
 * empty directory: every black-box run starts on one) gets a copy of a state migrated once by that same command
 * with the same migrations, databases and wrangler, kept in the OS temp directory under a key of their content:
 * wrangler takes ~30 s a database to apply the migrations to a new local database, a run of `npm test` starts eight
 * fresh stacks, and the copy is byte for byte what it would have written. A state already in use is migrated in
 * place, as before (a restart on the same state: nothing new to apply).
 */
const migrate = ({ cwd, configArgs, configFile, databases, state }) => {
  const apply = (to) => {
    for (const { database_name: database } of databases) {
      execFileSync(process.execPath, [wrangler, "d1", "migrations", "apply", database, "--local", ...configArgs, "--persist-to", to], { cwd, env, stdio: "ignore" })
    }
  }
  if (existsSync(state) && readdirSync(state).length > 0) return apply(state)
  const key = createHash("sha256").update(JSON.stringify({ wranglerVersion, databases }))
  for (const dir of [...new Set(databases.map((d) => resolve(dirname(configFile), d.migrations_dir ?? "migrations")))].sort()) {
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".sql")).sort()) key.update(`${file}\0`).update(readFileSync(join(dir, file)))
  }
  const migrated = join(tmpdir(), `factline-migrated-${key.digest("hex").slice(0, 24)}`)
  if (!existsSync(join(migrated, "complete"))) {
    rmSync(migrated, { recursive: true, force: true }) // a run stopped half-way through renaming leaves nothing usable
    const building = mkdtempSync(join(tmpdir(), "factline-migrating-"))
    apply(building)
    writeFileSync(join(building, "complete"), new Date().toISOString())
    try {
      renameSync(building, migrated)
    } catch {
      rmSync(building, { recursive: true, force: true }) // another run migrated the same state first
    }
  }
  cpSync(join(migrated, "v3"), join(state, "v3"), { recursive: true })
}

/**
 * Starts the stack; resolves to `{ base, inspectorPort, stop, kill, output }` once wrangler reports it is ready (the
 * inspector on a free port of its own unless `args` names one). The static assets
 * (the dashboard and /docs) are built first, from their current source. `vars` are passed as `--var NAME:VALUE`
 * (as `npm run dev` passes FACTLINE_KEEP_ACCEPTED); `args` are more `wrangler dev` arguments (`--test-scheduled`: GET
 * /__scheduled runs the scheduled handler). `kill()` is a hard stop — SIGKILL to wrangler and workerd
 * at once, nothing flushed — and resolves once the process has exited.
 */
export const start = async ({ cwd, state, port, config, vars = {}, args = [] }) => {
  // Several stacks at once (scripts/stacks.mjs) share the assets it built once: a build swaps the directory another
  // running stack serves.
  if (process.env[assetsBuilt] !== "1") await buildAssets()
  const configArgs = config ? ["--config", config] : []
  // Every database of the config gets the migrations: the platform database and each read database (placement).
  const configFile = config === undefined ? join(cwd, "wrangler.jsonc") : isAbsolute(config) ? config : join(cwd, config)
  const { d1_databases: databases = [] } = JSON.parse(readFileSync(configFile, "utf8").replace(/^\s*\/\/.*$/gm, ""))
  migrate({ cwd, configArgs, configFile, databases, state })
  // The crm module's CRM (its CRM sync runs for every qualified call): the local stand-in unless the caller names one.
  const crm = vars.CRM_URL === undefined ? { CRM_URL: (await CrmReceiver.start()).url } : {}
  const varArgs = Object.entries({ ...crm, ...vars }).flatMap(([name, value]) => ["--var", `${name}:${value}`])
  // An inspector port of its own (wrangler's default, 9229, is one port for every stack started at once).
  const given = args.indexOf("--inspector-port")
  const inspectorPort = given >= 0 ? Number(args[given + 1]) : await freePort()
  const inspector = given >= 0 ? [] : ["--inspector-port", String(inspectorPort)]
  const dev = spawn(process.execPath, [wrangler, "dev", ...configArgs, ...varArgs, ...inspector, ...args, "--persist-to", state, "--port", String(port), "--ip", "127.0.0.1"], {
    cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true
  })
  let output = ""
  dev.stdout.on("data", (d) => (output += d))
  dev.stderr.on("data", (d) => (output += d))
  const stop = () => {
    try {
      process.kill(-dev.pid, "SIGTERM")
    } catch {}
  }
  const exited = new Promise((resolve) => dev.once("exit", resolve))
  const kill = async () => {
    try {
      process.kill(-dev.pid, "SIGKILL")
    } catch {}
    await exited
  }
  for (let i = 0; !output.includes("Ready on"); i++) {
    if (i > 900 || dev.exitCode !== null) {
      stop()
      throw new Error(`wrangler dev did not start:\n${output}`)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  return { base: `http://127.0.0.1:${port}`, inspectorPort, stop, kill, output: () => output }
}

/**
 * A black-box run of checks against a fresh stack (its own state directory and free port):
 * `body({ base, check, defer })` calls `check(name, ok, detail)` per check and `defer(fn)` for what to
 * close afterwards. Prints a line per check and `<name>: N passed, M failed` (read by .ci/run); a throw
 * counts as a failure. Stops the stack, removes its state, and exits non-zero on any failure.
 */
export const checks = async (name, body) => {
  const state = mkdtempSync(join(tmpdir(), `factline-${name}-`))
  const deferred = []
  let stack
  let passed = 0
  let failed = 0
  const check = (label, ok, detail) => {
    if (ok) passed++
    else failed++
    console.log(`${ok ? "✓" : "✗"} ${label}${ok ? "" : ` — ${detail}`}`)
    return ok
  }
  try {
    stack = await start({ cwd: app, state, port: await freePort() })
    await body({ base: stack.base, check, defer: (fn) => deferred.push(fn) })
  } catch (error) {
    failed++
    console.log(`✗ ${name} run failed: ${error instanceof Error ? error.stack : String(error)}`)
  } finally {
    stack?.stop()
    for (const fn of deferred) await fn()
    rmSync(state, { recursive: true, force: true })
  }
  console.log(`${name}: ${passed} passed, ${failed} failed`)
  process.exit(failed === 0 ? 0 : 1)
}
