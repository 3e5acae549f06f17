#!/usr/bin/env node
/**
 * `npm run test:release`: the packages as a platform team gets them. Builds and packs @factline/schemas,
 * core, workers and client; runs the packed `factline init` into a temporary folder outside the workspace; installs
 * the tarballs there (no workspace links; the registry for everything else, --prefer-offline); then runs
 * the app's typecheck, its tests (specs in Node, integration tests inside workerd), `drizzle-kit generate`
 * (the template's migration must match the published tables: no change), `npm run deploy -- --dry-run`
 * (wrangler deploy --dry-run), and the token round trip against `wrangler dev`: the init's token and a
 * created one authenticate, a revoked one gets 401, and the dashboard and /docs come from the package's assets; and the packed `@factline/client`, in plain Node, emits an
 * event to `wrangler dev` and reads its projection back, and the packed `factline` command's operators'
 * commands call it through that client (`batches --json`; `health` refused with 403 for an admin token). Separate from `npm test`: it takes minutes.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
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
  await step("build and pack @factline/schemas, core, workers, client", () => {
    npm(["run", "build"], root)
    mkdirSync(tarballs)
    npm(["pack", "--pack-destination", tarballs, "-w", "@factline/schemas", "-w", "@factline/core", "-w", "@factline/workers", "-w", "@factline/client"], root)
    const packed = readdirSync(tarballs)
    expect(packed.length === 4, `expected 4 tarballs, got ${packed.join(", ")}`)
    for (const tgz of packed) {
      const listing = sh("tar", ["-tzf", join(tarballs, tgz)], root)
      expect(listing.includes("package/dist/index.js") && listing.includes("package/dist/index.d.ts"), `${tgz} has no dist/index.js and .d.ts`)
      expect(listing.includes("package/LICENSE") && listing.includes("package/README.md"), `${tgz} has no LICENSE or README.md`)
      if (tgz.startsWith("factline-workers-")) {
        const assets = ["_headers", "dashboard.html", "docs.html", "static/dashboard.js", "static/dashboard.css", "static/docs.js", "static/scalar/standalone.js"]
        const missing = assets.filter((file) => !listing.includes(`package/dist/assets/${file}`))
        expect(missing.length === 0, `${tgz} lacks the static assets ${missing.join(", ")}`)
      }
      // The template's own tests ship (they are the new app's); the packages' tests do not.
      expect(!listing.split("\n").some((f) => !f.startsWith("package/template/") && /\.test\.(ts|mjs)$/.test(f)), `${tgz} ships test files`)
    }
  })

  await step("factline init (from the packed @factline/workers) into a folder outside the workspace", () => {
    const unpacked = join(work, "unpacked")
    mkdirSync(unpacked)
    const workers = readdirSync(tarballs).find((f) => f.startsWith("factline-workers-"))
    sh("tar", ["-xzf", join(tarballs, workers), "-C", unpacked], root)
    const out = sh(process.execPath, [join(unpacked, "package", "cli", "factline.mjs"), "init", app], work)
    expect(out.includes("created a factline app"), out)
    // Install the packed tarballs instead of the registry's versions (not published yet).
    const pkg = JSON.parse(readFileSync(join(app, "package.json"), "utf8"))
    for (const tgz of readdirSync(tarballs)) {
      const name = `@factline/${tgz.replace(/^factline-/, "").replace(/-\d+\.\d+\.\d+.*\.tgz$/, "")}`
      pkg.dependencies[name] = `file:${join(tarballs, tgz)}`
    }
    writeFileSync(join(app, "package.json"), JSON.stringify(pkg, null, 2))
  })

  await step("npm install in the app (tarballs, and the registry with --prefer-offline)", () => {
    npm(["install", "--prefer-offline", "--no-audit", "--no-fund"], app)
    for (const name of ["schemas", "core", "workers", "client"]) {
      const dir = join(app, "node_modules", "@factline", name)
      expect(existsSync(join(dir, "dist", "index.js")) && !lstatSync(dir).isSymbolicLink(), `@factline/${name} is not installed from its tarball`)
    }
  })

  await step("the app typechecks (npm run typecheck)", () => npm(["run", "typecheck"], app, appEnv))

  await step("the app's tests pass: specs in Node, integration tests inside workerd (npm test)", () => {
    const out = npm(["test"], app, appEnv).replace(/\x1b\[[0-9;]*m/g, "")
    const counts = [...out.matchAll(/Tests\s+(\d+) passed/g)].map((m) => Number(m[1]))
    expect(counts.length === 2 && counts.every((n) => n > 0), `expected two vitest runs with passing tests:\n${out.slice(-3000)}`)
    process.stdout.write(`  specs: ${counts[0]} passed; workerd: ${counts[1]} passed\n`)
  })

  await step("the template's migration matches the published tables (drizzle-kit generate: no change)", () => {
    const out = npm(["run", "db:generate"], app, appEnv)
    expect(/No schema changes/.test(out), `drizzle-kit generated a migration: the template's is stale (npm run template:migrations -w @factline/workers)\n${out}`)
  })

  await step("npm run deploy -- --env staging --dry-run (config checks, plan, wrangler deploy --dry-run)", () => {
    const out = npm(["run", "deploy", "--", "--env", "staging", "--dry-run"], app, appEnv)
    expect(out.includes("config checks: passed") && out.includes("--dry-run: exiting now.") && out.includes("dry run passed"), out)
    const plain = npm(["exec", "--", "wrangler", "deploy", "--dry-run", "--outdir", join(work, "bundle")], app, appEnv)
    expect(plain.includes("--dry-run: exiting now."), plain)
  })

  await step("tokens round trip against npm run dev: created and init tokens authenticate, a revoked one gets 401", async () => {
    const localToken = /fl_[0-9A-Za-z]{43}/.exec(readFileSync(join(app, ".dev.vars"), "utf8"))[0]
    const created = npm(["run", "tokens", "--", "create", "--tenant", "acme", "--scopes", "read,events:write", "--name", "billing", "--file", ".dev.vars"], app, appEnv)
    const token = /\n\s+(fl_[0-9A-Za-z]{43})\n/.exec(created)?.[1]
    expect(token && !readFileSync(join(app, ".dev.vars"), "utf8").includes(token), `no token printed, or it was stored:\n${created}`)
    const listed = npm(["run", "tokens", "--", "list", "--file", ".dev.vars"], app, appEnv)
    expect(/billing\s+acme\s+read,events:write\s+\d{4}-/.test(listed) && !listed.includes(token), listed)

    const event = { schema_version: 1, message_type: "order.placed", idempotency_key: "order.placed:r1", subject: "r1", payload: { order_id: "r1", customer_id: "c9", total_cents: 5 } }
    await withDev(async (base) => {
      const post = await fetch(`${base}/v1/events`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify(event) })
      expect(post.status === 202, `created token: POST /v1/events answered ${post.status} ${await post.text()}`)
      const read = await fetch(`${base}/v1/projections/orders`, { headers: { authorization: `Bearer ${token}` } })
      expect(read.status === 200, `created token: GET answered ${read.status}`)
      const local = await fetch(`${base}/v1/projections/orders`, { headers: { authorization: `Bearer ${localToken}` } })
      expect(local.status === 200, `init's local token: GET answered ${local.status}`)
      // The dashboard and /docs, from the installed package's static assets, with their security headers.
      for (const path of ["/dashboard", "/docs", "/static/dashboard.js", "/static/scalar/standalone.js"]) {
        const page = await fetch(`${base}${path}`)
        expect(page.status === 200, `GET ${path} answered ${page.status}`)
        if (!path.startsWith("/static/")) expect(/script-src 'self'/.test(page.headers.get("content-security-policy") ?? ""), `GET ${path}: no CSP of its own origin`)
      }
    })
    npm(["run", "tokens", "--", "revoke", "billing", "--file", ".dev.vars"], app, appEnv)
    await withDev(async (base) => {
      const read = await fetch(`${base}/v1/projections/orders`, { headers: { authorization: `Bearer ${token}` } })
      expect(read.status === 401, `revoked token: GET answered ${read.status}, expected 401`)
      const local = await fetch(`${base}/v1/projections/orders`, { headers: { authorization: `Bearer ${localToken}` } })
      expect(local.status === 200, `the other token after the revoke: GET answered ${local.status}`)
    })
  })

  await step("the packed @factline/client, in plain Node, emits order.placed to npm run dev and reads the orders projection; the packed factline command lists batch jobs through it", async () => {
    const localToken = /fl_[0-9A-Za-z]{43}/.exec(readFileSync(join(app, ".dev.vars"), "utf8"))[0]
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
      sh(process.execPath, ["client-check.mjs", base, localToken], app)
      // The installed bin's operators' commands reach the API through the installed client's request layer.
      const factline = (...args) => spawnSync(process.execPath, [join(app, "node_modules", "@factline", "workers", "cli", "factline.mjs"), ...args, "--url", base, "--token", localToken], { cwd: app, encoding: "utf8" })
      const batches = factline("batches", "--json")
      expect(batches.status === 0 && Array.isArray(JSON.parse(batches.stdout).data), `factline batches --json: exit ${batches.status}\n${batches.stdout}${batches.stderr}`)
      const health = factline("health")
      expect(health.status === 1 && health.stderr.includes("403 forbidden"), `factline health with an admin token: exit ${health.status}\n${health.stderr}`)
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
