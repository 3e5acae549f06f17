/**
 * `factline deploy`: the dry run of the example passes and names every resource; a real run is checked
 * against a stand-in wrangler (this machine has no Cloudflare account): the order of its calls, creations
 * that are idempotent, the D1 id written back, and the refusals (config, secrets) before anything is created.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Deploy from "./deploy.mjs"
import * as Policies from "./Policies.mjs"
import * as Tokens from "./tokens.mjs"
import * as WranglerConfig from "./WranglerConfig.mjs"

const root = new URL("../../../", import.meta.url).pathname
const scratch = mkdtempSync(join(tmpdir(), "factline-deploy-test-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const run = async (argv, env = {}) => {
  let out = ""
  let err = ""
  const code = await Deploy.run(argv, { out: (s) => (out += s), err: (s) => (err += s) }, { PATH: process.env.PATH, HOME: process.env.HOME, ...env })
  return { code, out, err }
}

const tokens = JSON.stringify([Tokens.entryFor(Tokens.generate(), { name: "ops", tenant: "factline", scopes: ["platform"] })])
const secretsKey = Buffer.alloc(32, 7).toString("base64")

/** A stand-in wrangler in a fresh app: records each call; `existing` queues/databases answer "already exists". */
const fakeApp = (name, { existingQueues = [], existingDatabase, secretsOnWorker = [] } = {}) => {
  const dir = join(scratch, name)
  mkdirSync(join(dir, "node_modules", "wrangler", "bin"), { recursive: true })
  mkdirSync(join(dir, "migrations"))
  writeFileSync(join(dir, "migrations", "0000_init.sql"), "CREATE TABLE t (id TEXT);")
  writeFileSync(join(dir, "package.json"), "{}")
  writeFileSync(join(dir, "node_modules", "wrangler", "package.json"), JSON.stringify({ name: "wrangler", version: "0.0.0-fake" }))
  writeFileSync(join(dir, "node_modules", "wrangler", "bin", "wrangler.js"), `
const { appendFileSync, readFileSync } = require("node:fs")
const args = process.argv.slice(2)
const i = args.indexOf("--secrets-file")
const secrets = i >= 0 ? Object.keys(JSON.parse(readFileSync(args[i + 1], "utf8"))) : undefined
appendFileSync(${JSON.stringify(join(dir, "calls.log"))}, JSON.stringify({ args, secrets }) + "\\n")
const [a, b, c] = args
if (a === "queues" && b === "create" && ${JSON.stringify(existingQueues)}.includes(c)) { console.error("Queue name already exists [code: 11009]"); process.exit(1) }
if (a === "d1" && b === "list") { console.log(JSON.stringify(${JSON.stringify(existingDatabase ? [existingDatabase] : [])})) }
if (a === "d1" && b === "create") { console.log("Created database " + c + ' "database_id": "11111111-2222-4333-8444-555555555555"') }
if (a === "secret" && b === "list") { console.log(JSON.stringify(${JSON.stringify(secretsOnWorker.map((s) => ({ name: s, type: "secret_text" })))})) }
`)
  const config = {
    name: "app", main: "src/index.ts", compatibility_date: "2026-10-01",
    migrations: [{ tag: "v1", new_sqlite_classes: ["LedgerShard"] }], triggers: { crons: Policies.bindings.crons },
    ...WranglerConfig.platformBindings({ databaseName: "app", bucketName: "app-payloads" }),
    env: { production: WranglerConfig.platformBindings({ databaseName: "app-production", bucketName: "app-payloads-production" }) }
  }
  writeFileSync(join(dir, "wrangler.jsonc"), `// the app\n${WranglerConfig.render(config)}\n`)
  return dir
}
const callsOf = (dir) => readFileSync(join(dir, "calls.log"), "utf8").trim().split("\n").map((l) => JSON.parse(l))

describe("factline deploy", () => {
  it("--dry-run on the example prints every queue, DLQ, D1, R2 and passes wrangler deploy --dry-run", async () => {
    const result = await run(["--config", join(root, "apps/example/wrangler.jsonc"), "--env", "production", "--dry-run"], { WRANGLER_BUILD_CONDITIONS: "@factline/source,workerd,worker,browser" })
    expect(result.code, result.err + result.out).toBe(0)
    // Every tenant group's queue (factline-events-0…3) and one DLQ per purpose.
    for (const q of Policies.queues) for (const name of [...Policies.physicalQueues(q).map((p) => p.queue), q.deadLetterQueue]) expect(result.out).toContain(`- ${name}\n`)
    expect(result.out).toContain("D1 database factline-production (binding DB): create if missing")
    expect(result.out).toContain("R2 bucket factline-payloads-production (binding PAYLOADS): create if missing")
    expect(result.out).toContain("config checks: passed")
    expect(result.out).toContain("--dry-run: exiting now.")
    expect(result.out).toContain("dry run passed")
  })

  it("creates what is missing in order, tolerates what exists, writes the D1 id back and deploys with the secrets", async () => {
    const dir = fakeApp("first", { existingQueues: ["factline-events-0"] })
    const result = await run(["--config", join(dir, "wrangler.jsonc"), "--env", "production"], { FACTLINE_TOKENS: tokens, FACTLINE_SECRETS_KEY: secretsKey })
    expect(result.code, result.err + result.out).toBe(0)
    const calls = callsOf(dir).map((c) => c.args.filter((a) => !a.includes("/")).join(" "))
    expect(calls).toEqual([
      ...Policies.queues.flatMap((q) => [...Policies.physicalQueues(q).map((p) => p.queue), q.deadLetterQueue]).map((q) => `queues create ${q}`),
      "d1 list --json",
      "d1 create app-production",
      "r2 bucket create app-payloads-production",
      "d1 migrations apply app-production --remote --env production --config",
      "deploy --env production --config --secrets-file"
    ])
    expect(result.out).toContain("queue factline-events-0: exists")
    expect(callsOf(dir).at(-1).secrets).toEqual(["FACTLINE_TOKENS", "FACTLINE_SECRETS_KEY"])
    const written = WranglerConfig.parseJsonc(readFileSync(join(dir, "wrangler.jsonc"), "utf8"))
    expect(written.env.production.d1_databases[0].database_id).toBe("11111111-2222-4333-8444-555555555555")
    expect(written.d1_databases[0].database_id).toBe(WranglerConfig.unprovisionedDatabaseId) // the top level is untouched
  })

  it("refuses to deploy, creating nothing, when a secret is neither given nor set on the Worker", async () => {
    const dir = fakeApp("no-secrets", { secretsOnWorker: ["FACTLINE_TOKENS"] })
    const result = await run(["--config", join(dir, "wrangler.jsonc"), "--env", "production"])
    expect(result.code).toBe(1)
    expect(result.err).toContain("refusing to deploy: FACTLINE_SECRETS_KEY is not set")
    expect(result.err).toContain("npx wrangler secret put FACTLINE_SECRETS_KEY --env production")
    expect(callsOf(dir).map((c) => c.args[0])).toEqual(["secret"])
  })

  it("deploys without passing secrets when both are already set on the Worker", async () => {
    const dir = fakeApp("set", { secretsOnWorker: Policies.requiredSecrets, existingDatabase: { name: "app-production", uuid: "99999999-2222-4333-8444-555555555555" } })
    const result = await run(["--config", join(dir, "wrangler.jsonc"), "--env", "production"])
    expect(result.code, result.err).toBe(0)
    expect(callsOf(dir).some((c) => c.args[0] === "d1" && c.args[1] === "create")).toBe(false)
    expect(callsOf(dir).at(-1)).toEqual({ args: expect.arrayContaining(["deploy"]) })
  })

  it("refuses a config that breaks the policy, a malformed secret, and an unknown environment, before any wrangler call", async () => {
    const dir = fakeApp("broken")
    const path = join(dir, "wrangler.jsonc")
    writeFileSync(path, readFileSync(path, "utf8").replaceAll('"max_retries": 10, "dead_letter_queue": "factline-projections-dlq"', '"max_retries": 2, "dead_letter_queue": "factline-projections-dlq"'))
    const broken = await run(["--config", path, "--env", "production", "--dry-run"])
    expect(broken.code).toBe(1)
    expect(broken.err).toContain("queues.consumers[factline-projections-0].max_retries is 2, the policy says 10")

    const ok = fakeApp("bad-secret")
    const badKey = await run(["--config", join(ok, "wrangler.jsonc"), "--env", "production"], { FACTLINE_TOKENS: tokens, FACTLINE_SECRETS_KEY: "short" })
    expect(badKey.err).toContain("FACTLINE_SECRETS_KEY must be base64 of 32 random bytes")
    const noTokens = await run(["--config", join(ok, "wrangler.jsonc"), "--env", "production"], { FACTLINE_TOKENS: "[]", FACTLINE_SECRETS_KEY: secretsKey })
    expect(noTokens.err).toContain("FACTLINE_TOKENS has no token")
    const superuser = JSON.stringify([{ name: "root", sha256: "a".repeat(64), tenant_id: "acme", scopes: ["superuser"] }])
    const lockout = await run(["--config", join(ok, "wrangler.jsonc"), "--env", "production"], { FACTLINE_TOKENS: superuser, FACTLINE_SECRETS_KEY: secretsKey })
    expect(lockout.code).toBe(1)
    expect(lockout.err).toContain("Auth refuses FACTLINE_TOKENS")
    const unknown = await run(["--config", join(ok, "wrangler.jsonc"), "--env", "qa", "--dry-run"])
    expect(unknown.err).toContain("wrangler config has no env.qa section (declared: production)")
    expect(() => readFileSync(join(dir, "calls.log"))).toThrow()
    expect(() => readFileSync(join(ok, "calls.log"))).toThrow()
  })
})
