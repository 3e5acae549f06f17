#!/usr/bin/env node
/**
 * `npm run test:release` (the last step of `npm test`): leaving the monorepo as a platform team does, offline.
 * Packs @factline/schemas, core, workers and client (`npm run pack:local`'s code) into a temporary folder; runs
 * `npm run factline -- init <app> --from <tarballs>` into a folder outside the workspace (no hand edits: its
 * package.json points at the tarballs); `npm install --prefer-offline` (the tarballs, and the npm cache the
 * repository's own install filled: the template pins the repository's versions); scaffolds a module with the
 * installed `npx factline new:module leads` (its migration generated without a prompt); a type error fails the
 * app's `npm test` (tsc's message printed) and stops `npm run dev`; the README's local commands (`new:version`,
 * `tokens create|list|revoke`, `snapshots:write`, `factline --help`); then the app's typecheck, its tests (specs and the registry check
 * in Node, integration tests inside workerd), `db:generate` (no change), `deploy --env staging --dry-run`; and
 * against its `npm run dev` (its banner and start-up checks printed): the README's curl, an event posted with a
 * created token reaches its projection, init's tokens authenticate (the platform one reads what the dashboard
 * reads first), the dashboard and /docs come from the package's assets, the packed @factline/client emits and
 * reads in plain Node, the installed `factline` command's `health`, `dlq list`, `recover`, `runs` and `projections`
 * answer (init's platform token) — with `health` refused 403 for the admin token —, and a handler's defect is
 * dead-lettered with a stack that `factline dlq show` prints at `src/orders/Orders.ts:LINE`. KEEP=1 keeps the folder.
 */
import { spawn, spawnSync } from "node:child_process"
import * as PackLocal from "./pack-local.mjs"
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const work = mkdtempSync(join(tmpdir(), "factline-release-"))
const keep = process.env.KEEP === "1"
const started = Date.now()
const timings = []
let passed = 0
let failed = 0

const step = async (name, fn) => {
  const t = Date.now()
  process.stdout.write(`\n▶ ${name}\n`)
  try {
    await fn()
    passed++
    timings.push([name, Date.now() - t, "ok"])
    process.stdout.write(`✓ ${name} (${((Date.now() - t) / 1000).toFixed(1)} s)\n`)
  } catch (error) {
    failed++
    timings.push([name, Date.now() - t, "FAILED"])
    process.stdout.write(`✗ ${name}: ${error.message}\n`)
    throw error
  }
}
const sh = (command, args, cwd, env = {}) => {
  const result = spawnSync(command, args, { cwd, encoding: "utf8", env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 })
  const output = `${result.stdout}\n${result.stderr}`
  if (result.status !== 0) throw new Error(`${command} ${args.join(" ")} exited ${result.status}:\n${output.slice(-6000)}`)
  return output
}
const npm = (args, cwd, env) => sh("npm", args, cwd, env)
const expect = (condition, message) => {
  if (!condition) throw new Error(message)
}

const tarballs = join(work, "tarballs")
const app = join(work, "my-platform")
const appEnv = { WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" }
/** The tokens `init` printed (the README's dashboard login and operators' commands use them). */
const printed = {}
const orders = () => join(app, "src", "orders", "Orders.ts")
/** A command of the app's README: its exit code and output (not thrown on failure). */
const tryRun = (command, args, env = {}) => {
  const result = spawnSync(command, args, { cwd: app, encoding: "utf8", env: { ...process.env, ...appEnv, ...env }, maxBuffer: 64 * 1024 * 1024 })
  return { status: result.status, output: `${result.stdout}\n${result.stderr}`.replace(/\x1b\[[0-9;]*m/g, "") }
}

try {
  await step("pack @factline/schemas, core, workers, client (npm run pack:local)", () => {
    const packed = PackLocal.pack(tarballs, { quiet: true })
    for (const tgz of packed) {
      const listing = sh("tar", ["-tzf", join(tarballs, tgz)], root)
      expect(listing.includes("package/dist/index.js") && listing.includes("package/dist/index.d.ts"), `${tgz} has no dist/index.js and .d.ts`)
      expect(listing.includes("package/LICENSE") && listing.includes("package/README.md"), `${tgz} has no LICENSE or README.md`)
      if (tgz.startsWith("factline-workers-")) {
        const assets = ["_headers", "dashboard.html", "docs.html", "static/dashboard.js", "static/dashboard.css", "static/docs.js", "static/scalar/standalone.js"]
        const missing = assets.filter((file) => !listing.includes(`package/dist/assets/${file}`))
        expect(missing.length === 0, `${tgz} lacks the static assets ${missing.join(", ")}`)
        for (const cli of ["factline.js", "new-module.js", "generate.js", "DrizzleAnswers.cjs", "operate.js"]) expect(listing.includes(`package/dist/cli/${cli}`), `${tgz} lacks dist/cli/${cli}`)
      }
      // The template's own tests ship (they are the new app's); the packages' tests do not.
      expect(!listing.split("\n").some((f) => !f.startsWith("package/template/") && /\.test\.(ts|mjs)$/.test(f)), `${tgz} ships test files`)
    }
  })

  await step("factline init --from <tarballs> (npm run factline in this repository) into a folder outside the workspace", () => {
    const out = npm(["run", "-s", "factline", "--", "init", app, "--from", tarballs], root)
    expect(out.includes("created a factline app") && out.includes("from the tarballs in"), out)
    printed.local = /^\s+local\s+(fl_[0-9A-Za-z]{43})\s/m.exec(out)?.[1]
    printed.platform = /^\s+platform\s+(fl_[0-9A-Za-z]{43})\s/m.exec(out)?.[1]
    expect(printed.local && printed.platform, `init printed no local and platform tokens:\n${out}`)
    const deps = JSON.parse(readFileSync(join(app, "package.json"), "utf8")).dependencies
    for (const name of ["schemas", "core", "workers", "client"]) expect(deps[`@factline/${name}`]?.startsWith("file:"), `@factline/${name}: ${deps[`@factline/${name}`]}`)
  })

  await step("npm install in the app (the tarballs, and the npm cache: --prefer-offline)", () => {
    npm(["install", "--prefer-offline", "--no-audit", "--no-fund"], app)
    for (const name of ["schemas", "core", "workers", "client"]) {
      const dir = join(app, "node_modules", "@factline", name)
      expect(existsSync(join(dir, "dist", "index.js")) && !lstatSync(dir).isSymbolicLink(), `@factline/${name} is not installed from its tarball`)
    }
  })

  await step("npx factline new:module leads (the installed CLI: module, specs, registration, migration without a prompt); db:generate again: no change", () => {
    const out = sh("npx", ["--no-install", "factline", "new:module", "leads"], app, appEnv)
    expect(out.includes("created src/leads/Leads.ts") && out.includes("registered leads in src/modules.ts") && out.includes("generated migrations/0001_leads.sql"), out)
    expect(/No schema changes/.test(npm(["run", "db:generate"], app, appEnv)), "a second db:generate found changes: the template's migration is stale (npm run template:migrations -w @factline/workers)")
  })

  await step("a type error fails npm test (tsc's message printed) and stops npm run dev; removed, typecheck passes", () => {
    const source = readFileSync(orders(), "utf8")
    writeFileSync(orders(), `${source}\nexport const oops: number = "not a number"\n`)
    try {
      const test = tryRun("npm", ["test"])
      expect(test.status !== 0 && /Orders\.ts\(\d+,\d+\): error TS2322: Type 'string' is not assignable to type 'number'/.test(test.output), `npm test with a type error: exit ${test.status}\n${test.output.slice(-3000)}`)
      const dev = tryRun("npm", ["run", "dev"])
      expect(dev.status !== 0 && dev.output.includes("error TS2322") && dev.output.includes("factline dev: the app does not typecheck"), `npm run dev with a type error: exit ${dev.status}\n${dev.output.slice(-3000)}`)
    } finally {
      writeFileSync(orders(), source)
    }
  })

  await step("the README's local commands: new:version, tokens create|list|revoke, snapshots:write, factline --help", () => {
    const version = tryRun("npm", ["run", "new:version", "--", "orders", "order.placed"])
    expect(version.status === 0 && version.output.includes("OrderPlaced gains version 2") && version.output.includes("wrote src/orders/schemas/order.placed.v2.json"), `npm run new:version: exit ${version.status}\n${version.output}`)
    const created = tryRun("npm", ["run", "tokens", "--", "create", "--tenant", "acme", "--scopes", "read", "--name", "reporting", "--file", ".dev.vars"])
    expect(created.status === 0 && /\n\s+fl_[0-9A-Za-z]{43}\n/.test(created.output), `tokens create: exit ${created.status}\n${created.output}`)
    const listed = tryRun("npm", ["run", "tokens", "--", "list", "--file", ".dev.vars"])
    expect(listed.status === 0 && /platform\s+factline\s+platform/.test(listed.output) && listed.output.includes("reporting"), `tokens list: exit ${listed.status}\n${listed.output}`)
    const revoked = tryRun("npm", ["run", "tokens", "--", "revoke", "reporting", "--file", ".dev.vars"])
    expect(revoked.status === 0 && !tryRun("npm", ["run", "tokens", "--", "list", "--file", ".dev.vars"]).output.includes("reporting"), `tokens revoke: exit ${revoked.status}\n${revoked.output}`)
    const snapshots = tryRun("npm", ["run", "snapshots:write"])
    expect(snapshots.status === 0 && /Tests\s+\d+ passed/.test(snapshots.output), `snapshots:write: exit ${snapshots.status}\n${snapshots.output.slice(-2000)}`)
    const help = tryRun("npx", ["--no-install", "factline", "--help"])
    expect(help.status === 0 && help.output.includes("new:version <module> <type>") && help.output.includes("dev [wrangler dev options]"), `factline --help: exit ${help.status}\n${help.output}`)
  })

  await step("the app typechecks (npm run typecheck)", () => npm(["run", "typecheck"], app, appEnv))

  await step("the app's tests pass: specs and the registry check in Node, integration tests inside workerd (npm test)", () => {
    const out = npm(["test"], app, appEnv).replace(/\x1b\[[0-9;]*m/g, "")
    const counts = [...out.matchAll(/Tests\s+(\d+) passed/g)].map((m) => Number(m[1]))
    expect(counts.length === 2 && counts.every((n) => n > 0), `expected two vitest runs with passing tests:\n${out.slice(-3000)}`)
    expect(/registry\.spec\.ts/.test(out) && /leads\.spec\.ts/.test(out), `the registry spec or the scaffolded module's specs did not run:\n${out.slice(-3000)}`)
    process.stdout.write(`  node: ${counts[0]} passed; workerd: ${counts[1]} passed\n`)
  })

  await step("npm run deploy -- --env staging --dry-run (config checks, plan, wrangler deploy --dry-run)", () => {
    const out = npm(["run", "deploy", "--", "--env", "staging", "--dry-run"], app, appEnv)
    expect(out.includes("config checks: passed") && out.includes("--dry-run: exiting now.") && out.includes("dry run passed"), out)
  })

  await step("npm run dev -- --port N: banner and checks, the README's curl, tokens, the dashboard, the packed client, factline health / dlq / recover / runs / projections, a defect's stack at src/…:line", async () => {
    const localToken = /fl_[0-9A-Za-z]{43}/.exec(readFileSync(join(app, ".dev.vars"), "utf8"))[0]
    const created = npm(["run", "tokens", "--", "create", "--tenant", "acme", "--scopes", "read,events:write", "--name", "billing", "--file", ".dev.vars"], app, appEnv)
    const token = /\n\s+(fl_[0-9A-Za-z]{43})\n/.exec(created)?.[1]
    expect(token && !readFileSync(join(app, ".dev.vars"), "utf8").includes(token), `no token printed, or it was stored:\n${created}`)
    const platformToken = printed.platform
    // A defect in the team's code: the order handler throws on one total (it still typechecks: npm run dev starts).
    const source = readFileSync(orders(), "utf8")
    const throwing = source.replace("  handle: (m) =>\n", "  handle: (m) =>\n    m.payload.total_cents === 13 ? Effect.die(new TypeError(\"unlucky total\")) :\n")
    expect(throwing !== source, "the template's order handler changed: update the release test's throwing handler")
    writeFileSync(orders(), throwing)
    const throwLine = throwing.split("\n").findIndex((l) => l.includes("unlucky total")) + 1
    // The definition as a service outside Workers declares it: from @factline/core/definitions (no runtime), the template's schema.
    copyFileSync(join(root, "scripts", "release", "client-check.mjs"), join(app, "client-check.mjs"))
    await withDev(async (base, output) => {
      await readmeAgainstDev(base, output, platformToken)
      const lead = { schema_version: 1, message_type: "leads.received", idempotency_key: "leads.received:l1", subject: "l1", payload: { id: "l1", score: 72 } }
      const post = await fetch(`${base}/v1/events`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify(lead) })
      expect(post.status === 202, `created token: POST /v1/events answered ${post.status} ${await post.text()}`)
      let rows = []
      for (let i = 0; i < 300 && rows.length === 0; i++) {
        const read = await fetch(`${base}/v1/projections/leads?qualified=true`, { headers: { authorization: `Bearer ${token}` } })
        expect(read.status === 200, `GET /v1/projections/leads answered ${read.status}`)
        rows = (await read.json()).data
        if (rows.length === 0) await new Promise((r) => setTimeout(r, 100))
      }
      expect(rows.length === 1 && rows[0].id === "l1" && rows[0].qualified === true, `the scaffolded module's projection: ${JSON.stringify(rows)}`)
      const local = await fetch(`${base}/v1/projections/orders`, { headers: { authorization: `Bearer ${localToken}` } })
      expect(local.status === 200, `init's local token: GET answered ${local.status}`)
      // The dashboard and /docs, from the installed package's static assets, with their security headers.
      for (const path of ["/dashboard", "/docs", "/static/dashboard.js", "/static/scalar/standalone.js"]) {
        const page = await fetch(`${base}${path}`)
        expect(page.status === 200, `GET ${path} answered ${page.status}`)
        if (!path.startsWith("/static/")) expect(/script-src 'self'/.test(page.headers.get("content-security-policy") ?? ""), `GET ${path}: no CSP of its own origin`)
      }
      sh(process.execPath, ["client-check.mjs", base, localToken], app)
      // The installed bin (npx factline), its operators' commands through the installed client's request layer.
      const factline = (token, ...args) => spawnSync("npx", ["--no-install", "factline", ...args, "--url", base, "--token", token], { cwd: app, encoding: "utf8", env: { ...process.env, ...appEnv } })
      const health = factline(platformToken, "health")
      expect(health.status === 0 && /factline-events/.test(health.stdout), `factline health: exit ${health.status}\n${health.stdout}${health.stderr}`)
      const dlq = factline(platformToken, "dlq", "list", "--json")
      expect(dlq.status === 0 && Array.isArray(JSON.parse(dlq.stdout).data), `factline dlq list --json: exit ${dlq.status}\n${dlq.stdout}${dlq.stderr}`)
      const batches = factline(localToken, "batches", "--json")
      expect(batches.status === 0 && Array.isArray(JSON.parse(batches.stdout).data), `factline batches --json: exit ${batches.status}\n${batches.stdout}${batches.stderr}`)
      const refused = factline(localToken, "health")
      expect(refused.status === 1 && refused.stderr.includes("403 forbidden"), `factline health with an admin token: exit ${refused.status}\n${refused.stderr}`)
      const recover = factline(platformToken, "recover", "--since", "10m")
      expect(recover.status === 0, `factline recover --since 10m: exit ${recover.status}\n${recover.stdout}${recover.stderr}`)
      for (const args of [["runs"], ["projections"]]) {
        const ran = factline(platformToken, ...args)
        expect(ran.status === 0 && ran.stdout.trim() !== "", `factline ${args.join(" ")}: exit ${ran.status}\n${ran.stdout}${ran.stderr}`)
      }
      process.stdout.write(`  factline health (platform token):\n${health.stdout.replace(/^/gm, "    ")}`)
      // The defect's dead letter names the team's file and line (dev is unminified; dlq show maps through the bundle's source map).
      let letter
      for (let i = 0; i < 300 && letter === undefined; i++) {
        letter = JSON.parse(factline(platformToken, "dlq", "list", "--json").stdout).data.find((d) => d.subject === "o13")
        if (letter === undefined) await new Promise((r) => setTimeout(r, 200))
      }
      expect(letter?.reason === "defect", `the throwing handler's dead letter: ${JSON.stringify(letter)}`)
      const shown = factline(platformToken, "dlq", "show", letter.id)
      expect(shown.status === 0 && shown.stdout.includes(`src/orders/Orders.ts:${throwLine}:`), `factline dlq show: no frame at src/orders/Orders.ts:${throwLine}\n${shown.stdout}${shown.stderr}`)
      process.stdout.write(`  the defect's stack: ${shown.stdout.split("\n").find((l) => l.includes("src/orders/Orders.ts")).trim()}\n`)
    })
    // The README's SQL, against the local database dev migrated (the binding DB).
    const sql = tryRun("npx", ["--no-install", "wrangler", "d1", "execute", "DB", "--local", "--json", "--command", "SELECT reason, COUNT(*) AS n FROM dead_messages GROUP BY reason"])
    expect(sql.status === 0 && /"reason":\s*"defect"/.test(sql.output), `wrangler d1 execute DB --local: exit ${sql.status}\n${sql.output.slice(-2000)}`)
  })
} catch {
  // reported by step()
} finally {
  const total = ((Date.now() - started) / 1000).toFixed(1)
  process.stdout.write(`\nrelease test (${total} s):\n${timings.map(([n, ms, s]) => `  ${s.padEnd(6)} ${(ms / 1000).toFixed(1).padStart(6)} s  ${n}`).join("\n")}\n`)
  if (keep) process.stdout.write(`kept ${work}\n`)
  else rmSync(work, { recursive: true, force: true })
  process.stdout.write(`release: ${passed} passed, ${failed} failed\n`)
  process.exitCode = failed > 0 ? 1 : 0
}

/** `npm run dev` in the app on a free loopback port, for as long as `fn` runs; stopped by its process group. */
async function withDev(fn) {
  const port = await new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
  const dev = spawn("npm", ["run", "dev", "--", "--port", String(port), "--ip", "127.0.0.1"], {
    cwd: app, env: { ...process.env, ...appEnv }, stdio: ["ignore", "pipe", "pipe"], detached: true
  })
  let output = ""
  dev.stdout.on("data", (d) => (output += d))
  dev.stderr.on("data", (d) => (output += d))
  try {
    for (let i = 0; !output.includes("Ready on"); i++) {
      if (i > 1200 || dev.exitCode !== null) throw new Error(`npm run dev did not start:\n${output.slice(-3000)}`)
      await new Promise((r) => setTimeout(r, 100))
    }
    await fn(`http://127.0.0.1:${port}`, () => output)
  } finally {
    try {
      process.kill(-dev.pid, "SIGTERM")
    } catch {}
    await new Promise((r) => (dev.exitCode !== null ? r() : dev.once("exit", r)))
  }
}

/** The README's first minutes against `npm run dev`: its banner and start-up checks, a defect posted (its retries run meanwhile), the dashboard's login, the curl pair. */
async function readmeAgainstDev(base, output, platformToken) {
  // The development banner and the start-up checks (the platform token from .dev.vars).
  // The catch-up check's line comes last (not wrangler's log of its POST, which comes before it).
  for (let i = 0; i < 1200 && !/^factline: (every projection|projection )/m.test(output()); i++) await new Promise((r) => setTimeout(r, 100))
  for (const line of ["factline dev: the app typechecks", "retries: development scale 1/60 (production unchanged)", "runs: recording every attempt",
    `token platform (tenant factline; platform): ${platformToken}`, "dashboard: http://localhost:", "factline: no facts appended in the last 10 min", "factline: every projection is current"]) {
    expect(output().includes(line), `npm run dev did not print "${line}":\n${output().slice(-4000)}`)
  }
  // The defect first: its retries run while the rest is checked.
  const unlucky = { schema_version: 1, message_type: "order.placed", idempotency_key: "order.placed:o13", subject: "o13", payload: { order_id: "o13", customer_id: "c13", total_cents: 13 } }
  const posted = await fetch(`${base}/v1/events`, { method: "POST", headers: { authorization: `Bearer ${printed.local}`, "content-type": "application/json" }, body: JSON.stringify(unlucky) })
  expect(posted.status === 202, `POST the unlucky order answered ${posted.status}`)
  // The README's dashboard login: the platform token init printed reads the queues' health.
  const dashboard = await fetch(`${base}/v1/queues/health?window=15m`, { headers: { authorization: `Bearer ${platformToken}` } })
  expect(dashboard.status === 200, `the dashboard's first call with init's platform token answered ${dashboard.status}`)
  // The README's curl: an order posted and read back.
  const readme = { schema_version: 1, message_type: "order.placed", idempotency_key: "order.placed:o1", subject: "o1", payload: { order_id: "o1", customer_id: "c1", total_cents: 1200 } }
  const placed = await fetch(`${base}/v1/events`, { method: "POST", headers: { authorization: `Bearer ${printed.local}`, "content-type": "application/json" }, body: JSON.stringify(readme) })
  expect(placed.status === 202, `the README's POST answered ${placed.status}`)
  let ordered = []
  for (let i = 0; i < 300 && ordered.length === 0; i++) {
    ordered = (await (await fetch(`${base}/v1/projections/orders?customer_id=c1`, { headers: { authorization: `Bearer ${printed.local}` } })).json()).data
    if (ordered.length === 0) await new Promise((r) => setTimeout(r, 100))
  }
  expect(ordered.length === 1 && ordered[0].total_cents === 1200, `the README's GET: ${JSON.stringify(ordered)}`)
}
