#!/usr/bin/env node
/**
 * `npm run test:release` (the last step of `npm test`): leaving the monorepo as a platform team does, offline.
 * Packs @factline/schemas, core, workers and client (`npm run pack:local`'s code) into a temporary folder; runs
 * `npm run factline -- init <app> --from <tarballs>` into a folder outside the workspace (no hand edits: its
 * package.json points at the tarballs); `npm install --prefer-offline` (the tarballs, and the npm cache the
 * repository's own install filled: the template pins the repository's versions); scaffolds a module with the
 * installed `npx factline new:module leads` (its migration generated without a prompt); then the app's typecheck, its tests (specs and the registry check
 * in Node, integration tests inside workerd), `db:generate` (no change), `deploy --env staging --dry-run`; and
 * against its `npm run dev`: an event posted with the init's token reaches its projection, a created token
 * authenticates, the dashboard and /docs come from the package's assets, the packed @factline/client emits and
 * reads in plain Node, and the installed `factline` command's `health` and `dlq list` answer (a platform token)
 * — with `health` refused 403 for the admin token. KEEP=1 keeps the folder.
 */
import { spawn, spawnSync } from "node:child_process"
import * as PackLocal from "./pack-local.mjs"
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
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

  await step("npm run dev -- --port N: an event reaches its projection, tokens authenticate, the dashboard, the packed client, and factline health / dlq list against it", async () => {
    const localToken = /fl_[0-9A-Za-z]{43}/.exec(readFileSync(join(app, ".dev.vars"), "utf8"))[0]
    const created = npm(["run", "tokens", "--", "create", "--tenant", "acme", "--scopes", "read,events:write", "--name", "billing", "--file", ".dev.vars"], app, appEnv)
    const token = /\n\s+(fl_[0-9A-Za-z]{43})\n/.exec(created)?.[1]
    expect(token && !readFileSync(join(app, ".dev.vars"), "utf8").includes(token), `no token printed, or it was stored:\n${created}`)
    const ops = npm(["run", "tokens", "--", "create", "--tenant", "factline", "--scopes", "platform", "--name", "ops", "--file", ".dev.vars"], app, appEnv)
    const platformToken = /\n\s+(fl_[0-9A-Za-z]{43})\n/.exec(ops)?.[1]
    expect(platformToken, ops)
    // The definition as a service outside Workers declares it: from @factline/core/definitions (no runtime), the template's schema.
    writeFileSync(join(app, "client-check.mjs"), `
import { Schema } from "effect"
import { Client, InvalidPayload } from "@factline/client"
import { MessageDefinition } from "@factline/core/definitions"
const Id = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))
const OrderPlaced = MessageDefinition.event("order.placed").version(1, Schema.Struct({ order_id: Id, customer_id: Id, total_cents: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)) }))
const [base, token] = process.argv.slice(2)
const client = Client.make({ baseUrl: base, token, source: "release-check" })
const wrong = await client.emit(OrderPlaced, { order_id: "c2", customer_id: "cc", total_cents: -1 }, { subject: "c2", idempotency_key: "order.placed:c2" }).catch((e) => e)
if (!(wrong instanceof InvalidPayload) || wrong.problems[0]?.path !== "payload.total_cents") throw new Error("expected InvalidPayload on payload.total_cents, got " + wrong)
const emitted = await client.emit(OrderPlaced, { order_id: "c1", customer_id: "client-check", total_cents: 42 }, { subject: "c1", idempotency_key: "order.placed:c1" })
if (emitted.idempotency_key !== "order.placed:c1") throw new Error("unexpected item " + JSON.stringify(emitted))
for (let i = 0; i < 300; i++) {
  const { data } = await client.readProjection("orders", { where: { customer_id: "client-check" } })
  if (data.length === 1 && data[0].total_cents === 42) process.exit(0)
  await new Promise((r) => setTimeout(r, 100))
}
throw new Error("the order never reached the orders projection")
`)
    await withDev(async (base) => {
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
      process.stdout.write(`  factline health (platform token):\n${health.stdout.replace(/^/gm, "    ")}`)
    })
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
    await fn(`http://127.0.0.1:${port}`)
  } finally {
    try {
      process.kill(-dev.pid, "SIGTERM")
    } catch {}
    await new Promise((r) => (dev.exitCode !== null ? r() : dev.once("exit", r)))
  }
}
