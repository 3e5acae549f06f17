/**
 * `factline deploy`: the dry run of the example passes and names every resource; a real run is checked
 * against a stand-in wrangler (this machine has no Cloudflare account): the order of its calls, creations
 * that are idempotent, the D1 id written back, and the refusals (config, secrets) before anything is created.
 */
import { createHash } from "node:crypto"
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Deploy from "./deploy.ts"
import * as Policies from "./Policies.ts"
import * as Tokens from "./tokens.ts"
import * as WranglerConfig from "./WranglerConfig.ts"

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

/** The id the stand-in wrangler gives a D1 database it creates (derived from the name, so a test can predict it). */
const uuidSource = `(name) => {
  const h = require("node:crypto").createHash("md5").update(name).digest("hex")
  return h.slice(0, 8) + "-" + h.slice(8, 12) + "-4" + h.slice(13, 16) + "-8" + h.slice(17, 20) + "-" + h.slice(20, 32)
}`
const uuidOf = (name) => {
  const h = createHash("md5").update(name).digest("hex")
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`
}

/** A lifecycle rule as `wrangler r2 bucket lifecycle list` prints it. */
const ruleText = (r) => `name:     ${r.name}\nenabled:  ${r.enabled ?? "Yes"}\nprefix:   ${r.prefix || "(all prefixes)"}\naction:   ${r.action}`

/**
 * A stand-in wrangler in a fresh app: records each call; `existingQueues` answer "already exists",
 * `existingDatabases` are listed by `d1 list`, `lifecycleRules` by `r2 bucket lifecycle list`.
 * `production` replaces keys of the app's env.production section.
 */
const fakeApp = (name, { existingQueues = [], existingDatabase, existingDatabases = existingDatabase ? [existingDatabase] : [], secretsOnWorker = [], lifecycleRules = [], production = {} } = {}) => {
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
const [a, b, c, d, e] = args
if (a === "queues" && b === "create" && ${JSON.stringify(existingQueues)}.includes(c)) { console.error("Queue name already exists [code: 11009]"); process.exit(1) }
if (a === "d1" && b === "list") { console.log(JSON.stringify(${JSON.stringify(existingDatabases)})) }
if (a === "d1" && b === "create") { console.log("Created database " + c + ' "database_id": "' + (${uuidSource})(c) + '"') }
if (a === "secret" && b === "list") { console.log(JSON.stringify(${JSON.stringify(secretsOnWorker.map((s) => ({ name: s, type: "secret_text" })))})) }
if (a === "r2" && b === "bucket" && c === "lifecycle" && d === "list") {
  console.log("Listing lifecycle rules for bucket '" + e + "'...")
  console.log(${JSON.stringify(lifecycleRules.length === 0 ? "There are no lifecycle rules." : lifecycleRules.map(ruleText).join("\n\n"))})
}
`)
  const config = {
    name: "app", main: "src/index.ts", compatibility_date: "2026-10-01",
    migrations: Policies.durableObjectMigrations, triggers: { crons: Policies.bindings.crons },
    ...WranglerConfig.platformBindings({ databaseName: "app", bucketName: "app-payloads" }),
    env: { production: { ...WranglerConfig.platformBindings({ databaseName: "app-production", bucketName: "app-payloads-production" }), ...production } }
  }
  writeFileSync(join(dir, "wrangler.jsonc"), `// the app\n${WranglerConfig.render(config)}\n`)
  return dir
}
const callsOf = (dir) => {
  try {
    return readFileSync(join(dir, "calls.log"), "utf8").trim().split("\n").map((l) => JSON.parse(l))
  } catch {
    return []
  }
}
/** Each call as a line, without the paths (the config, a secrets file). */
const linesOf = (dir) => callsOf(dir).map((c) => c.args.filter((a) => !a.includes("/")).join(" "))
const secretsEnv = { FACTLINE_TOKENS: tokens, FACTLINE_SECRETS_KEY: secretsKey }
const productionOf = (dir) => WranglerConfig.parseJsonc(readFileSync(join(dir, "wrangler.jsonc"), "utf8")).env.production
/** A read database entry as the example writes it. */
const readDb = (index, overrides = {}) => ({ binding: `FACTLINE_READ_DB_${index}`, database_name: `app-production-read-${index}`, database_id: WranglerConfig.unprovisionedDatabaseId, migrations_dir: "migrations", ...overrides })
const platformDb = { binding: "DB", database_name: "app-production", database_id: WranglerConfig.unprovisionedDatabaseId, migrations_dir: "migrations" }

describe("factline deploy", () => {
  it("--dry-run on the example prints every queue, DLQ, D1 database, R2 and its lifecycle rule, and passes wrangler deploy --dry-run", async () => {
    const result = await run(["--config", join(root, "apps/example/wrangler.jsonc"), "--env", "production", "--dry-run"], { WRANGLER_BUILD_CONDITIONS: "@factline/source,workerd,worker,browser" })
    expect(result.code, result.err + result.out).toBe(0)
    // Every tenant group's queue (factline-events-0…3) kept 4 days, and one DLQ per purpose kept 14 days (seed 001).
    for (const q of Policies.queues) {
      for (const p of Policies.physicalQueues(q)) expect(result.out).toContain(`- ${p.queue} (message retention 4 days)\n`)
      expect(result.out).toContain(`- ${q.deadLetterQueue} (message retention 14 days)\n`)
    }
    expect(result.out).toContain("factline-events (4 tenant groups): consumer batches of 100 / 1 s, 5 retries, then factline-events-dlq")
    // The platform database and both read databases, each created if missing and migrated.
    expect(result.out).toContain("D1 databases (create if missing, 3;")
    for (const [name, role] of [["factline-production", "DB: the platform database"], ["factline-production-read-0", "FACTLINE_READ_DB_0: read database 0"], ["factline-production-read-1", "FACTLINE_READ_DB_1: read database 1"]]) {
      expect(result.out).toContain(`- ${name} (${role})`)
      expect(result.out).toContain(`- wrangler d1 migrations apply ${name} --remote\n`)
    }
    expect(result.out).toContain("R2 bucket factline-payloads-production (binding PAYLOADS): create if missing; lifecycle rule factline-payload-expiry: expire objects under _payloads/ (offloaded payloads) after 90 days")
    expect(result.out).toContain("config checks: passed")
    expect(result.out).toContain("--dry-run: exiting now.")
    expect(result.out).toContain("dry run passed")
  })

  it("creates what is missing in order, tolerates what exists, writes the D1 id back and deploys with the secrets", async () => {
    const dir = fakeApp("first", { existingQueues: ["factline-events-0"] })
    const result = await run(["--config", join(dir, "wrangler.jsonc"), "--env", "production"], secretsEnv)
    expect(result.code, result.err + result.out).toBe(0)
    expect(linesOf(dir)).toEqual([
      // Each queue created with its retention (DLQs 14 days); the one that exists gets it set.
      ...Policies.queues.flatMap((q) => [...Policies.physicalQueues(q).map((p) => p.queue), q.deadLetterQueue]).flatMap((q) => [
        `queues create ${q} --message-retention-period-secs ${q.endsWith("-dlq") ? 1_209_600 : 345_600} --env production --config`,
        ...(q === "factline-events-0" ? [`queues update ${q} --message-retention-period-secs 345600 --env production --config`] : [])
      ]),
      "d1 list --json --env production --config",
      "d1 create app-production --env production --config",
      "r2 bucket create app-payloads-production --env production --config",
      "r2 bucket lifecycle list app-payloads-production --env production --config",
      "r2 bucket lifecycle add app-payloads-production factline-payload-expiry --expire-days 90 --force --env production --config",
      "d1 migrations apply app-production --remote --env production --config",
      "deploy --env production --config --secrets-file"
    ])
    // The rule's prefix (it contains a "/", so linesOf drops it): only the offloaded payloads expire.
    expect(callsOf(dir).find((c) => c.args.includes("add")).args.slice(0, 7)).toEqual(["r2", "bucket", "lifecycle", "add", "app-payloads-production", "factline-payload-expiry", "_payloads/"])
    expect(result.out).toContain("queue factline-events-0: exists (message retention set to 4 days)")
    expect(result.out).toContain("queue factline-events-dlq: created (message retention 14 days)")
    expect(callsOf(dir).at(-1).secrets).toEqual(["FACTLINE_TOKENS", "FACTLINE_SECRETS_KEY"])
    const written = WranglerConfig.parseJsonc(readFileSync(join(dir, "wrangler.jsonc"), "utf8"))
    expect(written.env.production.d1_databases[0].database_id).toBe(uuidOf("app-production"))
    expect(written.d1_databases[0].database_id).toBe(WranglerConfig.unprovisionedDatabaseId) // the top level is untouched
  })

  it("creates and migrates every database the environment binds: DB and each read database, each id written back", async () => {
    const dir = fakeApp("read-dbs", {
      production: { d1_databases: [platformDb, readDb(0), readDb(1), readDb(2)] },
      existingDatabases: [{ name: "app-production-read-1", uuid: "99999999-2222-4333-8444-555555555555" }]
    })
    const result = await run(["--config", join(dir, "wrangler.jsonc"), "--env", "production"], secretsEnv)
    expect(result.code, result.err + result.out).toBe(0)
    const d1 = linesOf(dir).filter((l) => l.startsWith("d1 "))
    expect(d1).toEqual([
      "d1 list --json --env production --config",
      "d1 create app-production --env production --config",
      "d1 create app-production-read-0 --env production --config",
      "d1 create app-production-read-2 --env production --config",
      ...["app-production", "app-production-read-0", "app-production-read-1", "app-production-read-2"].map((n) => `d1 migrations apply ${n} --remote --env production --config`)
    ])
    expect(result.out).toContain("D1 app-production-read-1 (FACTLINE_READ_DB_1): exists (99999999-2222-4333-8444-555555555555)")
    expect(productionOf(dir).d1_databases.map((d) => [d.binding, d.database_id])).toEqual([
      ["DB", uuidOf("app-production")],
      ["FACTLINE_READ_DB_0", uuidOf("app-production-read-0")],
      ["FACTLINE_READ_DB_1", "99999999-2222-4333-8444-555555555555"],
      ["FACTLINE_READ_DB_2", uuidOf("app-production-read-2")]
    ])
    // Migrations run after every database exists, and before the Worker is deployed.
    const lines = linesOf(dir)
    expect(lines.findIndex((l) => l.startsWith("d1 migrations"))).toBeGreaterThan(lines.findLastIndex((l) => l.startsWith("d1 create")))
    expect(lines.at(-1)).toMatch(/^deploy /)
  })

  it("--read-databases N adds the missing read databases to the environment (comments kept), then creates and migrates them; never fewer", async () => {
    // DB is read database 0 here (no FACTLINE_READ_DB_0): its tenants' rows are in DB, so 0 is never re-bound.
    const dir = fakeApp("add-read-dbs", { production: { d1_databases: [platformDb, readDb(1)] } })
    const path = join(dir, "wrangler.jsonc")
    const before = readFileSync(path, "utf8")
    const dry = await run(["--config", path, "--env", "production", "--dry-run", "--read-databases", "4"])
    expect(dry.code, dry.err + dry.out).toBe(0)
    expect(dry.out).toContain("0. would add to env.production.d1_databases")
    expect(dry.out).toContain("+ FACTLINE_READ_DB_2: app-production-read-2\n       + FACTLINE_READ_DB_3: app-production-read-3\n")
    expect(dry.out).toContain("- wrangler d1 migrations apply app-production-read-3 --remote")
    expect(readFileSync(path, "utf8")).toBe(before)
    expect(linesOf(dir)).toEqual(["deploy --dry-run --outdir --env production --config"])

    const result = await run(["--config", path, "--env", "production", "--read-databases", "4"], secretsEnv)
    expect(result.code, result.err + result.out).toBe(0)
    const text = readFileSync(path, "utf8")
    expect(text.startsWith("// the app\n")).toBe(true)
    expect(productionOf(dir).d1_databases).toEqual([
      { ...platformDb, database_id: uuidOf("app-production") },
      ...[1, 2, 3].map((i) => readDb(i, { database_id: uuidOf(`app-production-read-${i}`) }))
    ])
    expect(WranglerConfig.parseJsonc(text).d1_databases.map((d) => d.binding)).toEqual(["DB"]) // the top level is untouched
    expect(linesOf(dir).filter((l) => l.startsWith("d1 create"))).toEqual(["app-production", "app-production-read-1", "app-production-read-2", "app-production-read-3"].map((n) => `d1 create ${n} --env production --config`))
    expect(linesOf(dir).filter((l) => l.startsWith("d1 migrations"))).toHaveLength(4)
    // Again: nothing to add; fewer than bound is refused before any call.
    const again = await run(["--config", path, "--env", "production", "--dry-run", "--read-databases", "4"])
    expect(again.out).not.toContain("would add")
    const calls = callsOf(dir).length
    const fewer = await run(["--config", path, "--env", "production", "--read-databases", "2"], secretsEnv)
    expect(fewer.code).toBe(1)
    expect(fewer.err).toContain("--read-databases 2: 4 are bound already; a read database cannot be removed by deploy")
    expect(callsOf(dir)).toHaveLength(calls)
  })

  it("refuses read databases with a gap, another migrations_dir or a shared database, naming each, before any wrangler call", async () => {
    const gap = fakeApp("gap", { production: { d1_databases: [platformDb, readDb(0), readDb(2), readDb(4)] } })
    const refused = await run(["--config", join(gap, "wrangler.jsonc"), "--env", "production"], secretsEnv)
    expect(refused.code).toBe(1)
    expect(refused.err).toContain("d1_databases: FACTLINE_READ_DB_1, FACTLINE_READ_DB_3 are missing but FACTLINE_READ_DB_4 is bound: number the read databases from 0 without gaps")
    expect(callsOf(gap)).toEqual([])

    const mixed = fakeApp("mixed", { production: { d1_databases: [platformDb, readDb(0, { migrations_dir: "other" }), readDb(1, { database_name: "app-production" }), { ...readDb(2), binding: "FACTLINE_READ_DB_02" }], vars: { FACTLINE_READ_DBS_OPEN: "0,5" } } })
    const problems = await run(["--config", join(mixed, "wrangler.jsonc"), "--env", "production", "--dry-run"])
    expect(problems.code).toBe(1)
    expect(problems.err).toContain('d1_databases[FACTLINE_READ_DB_0].migrations_dir is "other", DB\'s is "migrations": every database gets the same migrations')
    expect(problems.err).toContain('d1_databases: database_name "app-production" is bound as DB and FACTLINE_READ_DB_1')
    expect(problems.err).toContain("d1_databases[FACTLINE_READ_DB_02]: the Worker reads no such binding")
    expect(problems.err).toContain('vars.FACTLINE_READ_DBS_OPEN is "0,5": only read databases 0…1 are bound')
    expect(callsOf(mixed)).toEqual([])
  })

  it("a config with 2 queue groups: every group's queue is checked, listed and created, with one DLQ per purpose; a missing group is refused", async () => {
    const groups = 2
    const dir = fakeApp("groups", { production: { ...WranglerConfig.platformBindings({ databaseName: "app-production", bucketName: "app-payloads-production", queueGroups: groups }), vars: { FACTLINE_QUEUE_GROUPS: "2" } } })
    const dry = await run(["--config", join(dir, "wrangler.jsonc"), "--env", "production", "--dry-run"])
    expect(dry.code, dry.err + dry.out).toBe(0)
    expect(dry.out).toContain("in 2 tenant groups each")
    expect(dry.out).toContain("factline-projections (2 tenant groups): consumer batches of 100 / 0.5 s, 10 retries, then factline-projections-dlq\n       - factline-projections-0 (message retention 4 days)\n       - factline-projections-1 (message retention 4 days)\n       - factline-projections-dlq (message retention 14 days)\n")
    expect(dry.out).not.toContain("factline-events-2")
    const result = await run(["--config", join(dir, "wrangler.jsonc"), "--env", "production"], secretsEnv)
    expect(result.code, result.err + result.out).toBe(0)
    const created = linesOf(dir).filter((l) => l.startsWith("queues create")).map((l) => l.split(" ")[2])
    expect(created).toEqual([
      "factline-events-0", "factline-events-1", "factline-events-dlq",
      "factline-projections-0", "factline-projections-1", "factline-projections-dlq",
      "factline-fact-processing-0", "factline-fact-processing-1", "factline-fact-processing-dlq",
      "factline-webhooks", "factline-webhooks-dlq", "factline-batch", "factline-batch-dlq"
    ])

    // Three groups asked for, two declared: group 2's producer and consumer are missing, for every grouped purpose.
    const short = fakeApp("groups-short", { production: { ...WranglerConfig.platformBindings({ databaseName: "app-production", bucketName: "app-payloads-production", queueGroups: 2 }), vars: { FACTLINE_QUEUE_GROUPS: "3" } } })
    const refused = await run(["--config", join(short, "wrangler.jsonc"), "--env", "production", "--dry-run"])
    expect(refused.code).toBe(1)
    for (const [queue, binding] of [["factline-events-2", "EVENTS_QUEUE_2"], ["factline-projections-2", "PROJECTIONS_QUEUE_2"], ["factline-fact-processing-2", "FACT_PROCESSING_QUEUE_2"]]) {
      expect(refused.err).toContain(`queues.producers: missing { queue: "${queue}", binding: "${binding}" }`)
      expect(refused.err).toContain(`queues.consumers: missing the consumer of ${queue}`)
    }
    const bad = fakeApp("groups-bad", { production: { vars: { FACTLINE_QUEUE_GROUPS: "0" } } })
    expect((await run(["--config", join(bad, "wrangler.jsonc"), "--env", "production", "--dry-run"])).err).toContain('vars.FACTLINE_QUEUE_GROUPS is "0": a whole number from 1 to 32')
    expect(callsOf(short)).toEqual([])
  })

  it("the payload lifecycle rule is added once: left alone when present, replaced when its age differs, and another rule expiring the archive is named", async () => {
    const present = fakeApp("rule-present", { lifecycleRules: [{ name: "factline-payload-expiry", prefix: "_payloads/", action: "Expire objects after 90 days" }] })
    const kept = await run(["--config", join(present, "wrangler.jsonc"), "--env", "production"], secretsEnv)
    expect(kept.code, kept.err + kept.out).toBe(0)
    expect(kept.out).toContain("R2 app-payloads-production lifecycle rule factline-payload-expiry: present (_payloads/, expire objects after 90 days)")
    expect(linesOf(present).filter((l) => l.startsWith("r2 bucket lifecycle"))).toEqual(["r2 bucket lifecycle list app-payloads-production --env production --config"])

    // 30 days asked for (the environment's var): the 90-day rule is replaced; a rule over every prefix is named.
    const differs = fakeApp("rule-differs", {
      production: { vars: { FACTLINE_PAYLOAD_RETENTION_DAYS: "30" } },
      lifecycleRules: [
        { name: "Default Multipart Abort Rule", prefix: "", action: "Abort incomplete multipart uploads after 7 days" },
        { name: "factline-payload-expiry", prefix: "_payloads/", action: "Expire objects after 90 days" },
        { name: "cleanup", prefix: "", action: "Expire objects after 365 days" }
      ]
    })
    const replaced = await run(["--config", join(differs, "wrangler.jsonc"), "--env", "production"], secretsEnv)
    expect(replaced.code, replaced.err + replaced.out).toBe(0)
    expect(linesOf(differs).filter((l) => l.startsWith("r2 bucket lifecycle"))).toEqual([
      "r2 bucket lifecycle list app-payloads-production --env production --config",
      "r2 bucket lifecycle remove app-payloads-production --name factline-payload-expiry --env production --config",
      "r2 bucket lifecycle add app-payloads-production factline-payload-expiry --expire-days 30 --force --env production --config"
    ])
    expect(replaced.err).toContain("warning: R2 app-payloads-production lifecycle rule cleanup expires objects under (all prefixes)")
    expect(replaced.err).not.toContain("Default Multipart Abort Rule")

    // --payload-retention-days wins over the var; an invalid one is refused before any call.
    const flag = await run(["--config", join(differs, "wrangler.jsonc"), "--env", "production", "--dry-run", "--payload-retention-days", "120"])
    expect(flag.out).toContain("under _payloads/ (offloaded payloads) after 120 days")
    const calls = callsOf(differs).length
    const invalid = await run(["--config", join(differs, "wrangler.jsonc"), "--env", "production", "--payload-retention-days", "0"], secretsEnv)
    expect(invalid.err).toContain("--payload-retention-days must be a whole number of days, at least 1")
    expect(callsOf(differs)).toHaveLength(calls)
  })

  it("--dry-run touches nothing: no wrangler call but deploy --dry-run, the config unchanged", async () => {
    const dir = fakeApp("dry", { production: { d1_databases: [platformDb, readDb(0)] } })
    const path = join(dir, "wrangler.jsonc")
    const before = readFileSync(path, "utf8")
    const result = await run(["--config", path, "--env", "production", "--dry-run", "--read-databases", "3"], secretsEnv)
    expect(result.code, result.err + result.out).toBe(0)
    expect(result.out).toContain("dry run: nothing was created or changed")
    expect(linesOf(dir)).toEqual(["deploy --dry-run --outdir --env production --config"])
    expect(readFileSync(path, "utf8")).toBe(before)
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

  it("an app that binds workflows at the top level must bind them in each environment (not inherited), of class FactlineWorkflow", async () => {
    const workflows = [{ name: "factline-workflows", binding: "FACTLINE_WORKFLOWS", class_name: "FactlineWorkflow" }]
    const forgotten = fakeApp("workflows-forgotten")
    const path = join(forgotten, "wrangler.jsonc")
    const config = WranglerConfig.parseJsonc(readFileSync(path, "utf8"))
    writeFileSync(path, WranglerConfig.render({ ...config, workflows }))
    const refused = await run(["--config", path, "--env", "production", "--dry-run"])
    expect(refused.code).toBe(1)
    expect(refused.err).toContain('workflows: missing { name: "factline-workflows", binding: "FACTLINE_WORKFLOWS", class_name: "FactlineWorkflow" }')
    const wrongClass = fakeApp("workflows-wrong-class", { production: { workflows: [{ ...workflows[0], class_name: "CrmSync" }] } })
    const wrong = await run(["--config", join(wrongClass, "wrangler.jsonc"), "--env", "production", "--dry-run"])
    expect(wrong.code).toBe(1)
    expect(wrong.err).toContain('workflows[FACTLINE_WORKFLOWS].class_name is "CrmSync": it must be "FactlineWorkflow"')
    expect(callsOf(forgotten)).toEqual([])
    expect(callsOf(wrongClass)).toEqual([])
  })
})
