/**
 * `factline deploy [--env staging|production] [--dry-run] [--read-databases N] [--payload-retention-days D]`:
 * provisions and deploys a factline app with wrangler. In order: checks wrangler.jsonc against the platform
 * (every queue — each tenant group's — and DLQ with the policy's consumer settings, the platform D1 and the
 * read databases numbered without gaps, R2, the ledger Durable Object, the cron, no local-only setting);
 * refuses without the required secrets; adds the read databases `--read-databases` asks for to the config;
 * creates what is missing — every queue and DLQ with its message retention (4 days; 14 days for a DLQ — an
 * existing queue has it set), every D1 database (each new id written back into
 * wrangler.jsonc), the R2 bucket and its lifecycle rule expiring offloaded payloads — each step idempotent;
 * applies the D1 migrations remotely to every database; then `wrangler deploy`, passing the secrets it was
 * given with the deploy.
 *
 * `--dry-run` prints that plan and runs `wrangler deploy --dry-run` (bundling and config validation by
 * wrangler), touching no account and no file. It does not manage DNS, routes or access policies.
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join, relative, resolve } from "node:path"
import * as Args from "./Args.js"
import * as Io from "./Io.js"
import * as Policies from "./Policies.js"
import * as Tokens from "./tokens.js"
import * as WranglerConfig from "./WranglerConfig.js"

export const usage = `usage: factline deploy [options]

  --env NAME            the wrangler environment to deploy (env.NAME in wrangler.jsonc), e.g. staging, production
  --dry-run             print the plan and run 'wrangler deploy --dry-run'; touches no Cloudflare account
  --config PATH         the wrangler config (default: wrangler.jsonc)
  --secrets-file PATH   FACTLINE_TOKENS and FACTLINE_SECRETS_KEY to deploy with (dotenv or JSON; never commit it);
                        they may also come from the environment, or be set already (wrangler secret put)
  --read-databases N    bind N read databases: adds FACTLINE_READ_DB_<n> entries named <DB's name>-read-<n> to the
                        environment's d1_databases (never renumbering or removing one), then creates and migrates them
  --payload-retention-days D
                        days before an offloaded payload (R2 _payloads/) expires (default: the environment's
                        vars.${Policies.payloads.retentionVar}, else ${Policies.payloads.defaultRetentionDays})

Cloudflare credentials: 'wrangler login', or CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID in CI.`

class DeployError extends Error {}

/** The process's environment, or a test's. */
type Environment = Readonly<Record<string, string | undefined>>
/** A required secret's value and where it came from (`environment`, or the secrets file's path). */
interface Secret {
  readonly value: string
  readonly from: string
}

/** Secrets from a dotenv or JSON file, then the environment (which wins, as with wrangler's own --secrets-file). */
const readSecrets = (file: string | undefined, env: Environment): Record<string, Secret> => {
  const found: Record<string, unknown> = {}
  if (file !== undefined) {
    if (!existsSync(file)) throw new DeployError(`--secrets-file ${file} does not exist`)
    const text = readFileSync(file, "utf8")
    if (file.endsWith(".json")) Object.assign(found, JSON.parse(text))
    else {
      for (const line of text.split("\n")) {
        const m = /^\s*([A-Z0-9_]+)\s*=\s*(.*)$/.exec(line)
        if (m) found[m[1]!] = m[2]!.trim().replace(/^'(.*)'$/s, "$1").replace(/^"(.*)"$/s, "$1")
      }
    }
  }
  const result: Record<string, Secret> = {}
  for (const name of Policies.requiredSecrets) {
    const fromEnv = env[name]
    const fromFile = found[name]
    if (fromEnv !== undefined && fromEnv !== "") result[name] = { value: fromEnv, from: "environment" }
    // A secret is text: a JSON file's other value (a number, a list) is passed on as its JSON.
    else if (file !== undefined && fromFile !== undefined && fromFile !== "") result[name] = { value: typeof fromFile === "string" ? fromFile : JSON.stringify(fromFile), from: file }
  }
  return result
}

/** A setting the config checks require, or the DeployError naming it. */
const required = (value: string | undefined, what: string): string => {
  if (value === undefined) throw new DeployError(`${what} is missing`)
  return value
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** What each required secret must look like; a malformed one would refuse every request or every webhook. */
const secretProblems = (secrets: Readonly<Record<string, Secret>>): Array<string> => {
  const problems: Array<string> = []
  const tokens = secrets.FACTLINE_TOKENS?.value
  if (tokens !== undefined) {
    try {
      if (Tokens.parse(tokens).length === 0) problems.push("FACTLINE_TOKENS has no token: every request would be refused")
      else {
        const refused = Tokens.refusedByAuth(tokens)
        if (refused !== undefined) problems.push(`Auth refuses FACTLINE_TOKENS, so every request would be refused: ${refused}`)
      }
    } catch (error) {
      problems.push(messageOf(error).replace("the current FACTLINE_TOKENS", "FACTLINE_TOKENS"))
    }
  }
  const key = secrets.FACTLINE_SECRETS_KEY?.value
  if (key !== undefined && Buffer.from(key, "base64").length !== 32) problems.push("FACTLINE_SECRETS_KEY must be base64 of 32 random bytes (openssl rand -base64 32)")
  return problems
}

/** The wrangler CLI the app installed (its own version), run with this Node. */
const wranglerOf = (cwd: string): string => {
  try {
    return join(dirname(createRequire(join(cwd, "package.json")).resolve("wrangler/package.json")), "bin", "wrangler.js")
  } catch {
    throw new DeployError("wrangler is not installed here: npm install --save-dev wrangler")
  }
}

/** The plan's queue list: each purpose with its group queues and its DLQ, then any other queue of the config. */
const queuePlan = (queues: ReadonlyArray<string>, groups: number): string => {
  const listed = new Set<string>()
  const lines: Array<string> = []
  for (const q of Policies.queues) {
    const names = [...Policies.physicalQueues(q, groups).map((p) => p.queue), q.deadLetterQueue].filter((name) => queues.includes(name))
    lines.push(`       ${q.queue}${q.grouped ? ` (${groups} tenant group${groups > 1 ? "s" : ""})` : ""}: consumer batches of ${q.maxBatchSize} / ${q.maxBatchTimeoutSeconds} s, ${q.maxRetries} retries, then ${q.deadLetterQueue}`)
    for (const name of names) {
      const retention = Policies.retentionOf(name)
      lines.push(`       - ${name}${retention === undefined ? "" : ` (message retention ${Policies.retentionText(retention)})`}`)
      listed.add(name)
    }
  }
  const other = queues.filter((name) => !listed.has(name))
  if (other.length > 0) {
    lines.push(`       other queues of the config (a group queue beyond FACTLINE_QUEUE_GROUPS=${groups} keeps its consumer so that it drains):`)
    for (const name of other) lines.push(`       - ${name}`)
  }
  return lines.join("\n")
}

/** A rule `wrangler r2 bucket lifecycle list` prints, with the fields it printed. */
export interface LifecycleRule {
  readonly name: string
  enabled?: string
  prefix?: string
  action?: string
}

/** The rules `wrangler r2 bucket lifecycle list` prints: `{ name, enabled, prefix, action }` each. */
export const parseLifecycleRules = (output: string): Array<LifecycleRule> => {
  const rules: Array<LifecycleRule> = []
  for (const line of output.replace(/\x1b\[[0-9;]*m/g, "").split("\n")) {
    const m = /^\s*(name|enabled|prefix|action):\s*(.*?)\s*$/.exec(line)
    if (!m) continue
    const [, field, value = ""] = m
    if (field === "name") rules.push({ name: value })
    else if (rules.length > 0) rules[rules.length - 1]![field as "enabled" | "prefix" | "action"] = value
  }
  return rules
}

/** Runs the app's wrangler with `args`: its exit status and (captured) output; a failure throws unless allowed. */
type RunWrangler = (args: ReadonlyArray<string>, options?: { readonly capture?: boolean; readonly allowFailure?: boolean }) => { readonly status: number | null; readonly output: string }

/**
 * The bucket's rule expiring offloaded payloads (`_payloads/`) after `days`: added when missing, replaced
 * (removed, added) when its prefix or age differ, left alone when present. Any other rule that expires
 * objects outside `_payloads/` is named: it would delete uploads, batch files or the facts archive.
 */
const payloadLifecycle = (runWrangler: RunWrangler, io: Io.Io, bucket: string, days: number, envArgs: ReadonlyArray<string>): void => {
  const { rule, prefix } = Policies.payloads
  const listed = runWrangler(["r2", "bucket", "lifecycle", "list", bucket, ...envArgs], { capture: true })
  const rules = parseLifecycleRules(listed.output)
  for (const other of rules) {
    if (other.name !== rule && /expire objects/i.test(other.action ?? "") && !(other.prefix ?? "").startsWith(prefix)) {
      io.err(`warning: R2 ${bucket} lifecycle rule ${other.name} expires objects under ${other.prefix || "(all prefixes)"} (${other.action}): outside ${prefix} that deletes uploads, batch files or the facts archive (<tenant>/archive/facts/…), which must never expire. Check it: wrangler r2 bucket lifecycle list ${bucket}\n`)
    }
  }
  const present = rules.find((r) => r.name === rule)
  const wanted = `Expire objects after ${days} days`
  if (present && present.prefix === prefix && (present.action ?? "").split(", ").includes(wanted) && present.enabled !== "No") {
    io.out(`R2 ${bucket} lifecycle rule ${rule}: present (${prefix}, ${wanted.toLowerCase()})\n`)
    return
  }
  if (present) {
    runWrangler(["r2", "bucket", "lifecycle", "remove", bucket, "--name", rule, ...envArgs], { capture: true })
    io.out(`R2 ${bucket} lifecycle rule ${rule}: was ${present.prefix} ${present.action}${present.enabled === "No" ? " (disabled)" : ""}; replacing it\n`)
  }
  runWrangler(["r2", "bucket", "lifecycle", "add", bucket, rule, prefix, "--expire-days", String(days), "--force", ...envArgs], { capture: true })
  io.out(`R2 ${bucket} lifecycle rule ${rule}: added (objects under ${prefix} expire after ${days} days)\n`)
}

/** The app's wrangler run in its folder, with CI set (no prompts). */
const wranglerRunner = (appDir: string, wrangler: string, wranglerEnv: Environment): RunWrangler => (args, { capture = false, allowFailure = false } = {}) => {
  const result = spawnSync(process.execPath, [wrangler, ...args], { cwd: appDir, env: { ...wranglerEnv, CI: "true" }, encoding: "utf8", stdio: capture ? "pipe" : "inherit" })
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}`
  if (result.status !== 0 && !allowFailure) throw new DeployError(`wrangler ${args.join(" ")} failed (exit ${result.status})${capture ? `:\n${output}` : ""}`)
  return { status: result.status, output }
}

/** The read databases --read-databases adds (none without it). */
const readDatabaseAdditions = (given: string | undefined, configured: WranglerConfig.Config): Array<WranglerConfig.Database> => {
  if (given === undefined) return []
  const n = /^[0-9]+$/.test(given) ? Number(given) : NaN
  try {
    return WranglerConfig.readDatabasesToAdd(configured, n)
  } catch (error) {
    throw new DeployError(messageOf(error))
  }
}

/** What the plan shows: the config, what it adds, and what deploying does (or would do) step by step. */
interface Plan {
  readonly dryRun: boolean
  readonly section: string
  readonly configPath: string
  readonly readDatabases: string | undefined
  readonly additions: ReadonlyArray<WranglerConfig.Database>
  readonly effective: WranglerConfig.Config
  readonly res: ReturnType<typeof WranglerConfig.resources>
  readonly groups: number
  readonly retentionDays: number
  readonly migrations: ReadonlyArray<string>
  readonly migrationsDir: string
  readonly appDir: string
  readonly secrets: Record<string, Secret>
  readonly envArgs: ReadonlyArray<string>
}

const printPlan = (io: Io.Io, { dryRun, section, configPath, readDatabases, additions, effective, res, groups, retentionDays, migrations, migrationsDir, appDir, secrets, envArgs }: Plan): void => {
  io.out(`\nplan — worker ${res.worker}${res.accountId ? ` in account ${res.accountId}` : " (account: CLOUDFLARE_ACCOUNT_ID or wrangler login)"}:\n`)
  if (additions.length > 0) {
    io.out(`  0. ${dryRun ? "would add" : "add"} to ${section}.d1_databases of ${relative(process.cwd(), configPath) || configPath} (--read-databases ${readDatabases}):\n${additions.map((a) => `       + ${a.binding}: ${a.database_name}`).join("\n")}\n`)
    const open = effective.vars?.FACTLINE_READ_DBS_OPEN
    if (open) io.out(`     note: vars.FACTLINE_READ_DBS_OPEN is "${open}": new tenants go to the new databases only once you list them there\n`)
  }
  io.out(`  1. queues (create if missing, ${res.queues.length}):\n${queuePlan(res.queues, groups)}\n`)
  io.out(`  2. D1 databases (create if missing, ${res.databases.length}; a new one's database_id is written into the config):\n${res.databases.map((d) => `       - ${d.name} (${d.binding}: ${d.role === "platform" ? `the platform database${res.platformIsReadDatabase0 ? " and read database 0" : ""}` : `read database ${d.index}`}${d.id && d.id !== WranglerConfig.unprovisionedDatabaseId ? `; database_id ${d.id}` : ""})`).join("\n")}\n`)
  io.out(`  3. R2 bucket ${res.bucket} (binding ${Policies.bindings.payloads}): create if missing; lifecycle rule ${Policies.payloads.rule}: expire objects under ${Policies.payloads.prefix} (offloaded payloads) after ${retentionDays} days — added if missing, replaced if it differs, left alone when present; nothing else in the bucket expires (uploads, batch files, the facts archive)\n`)
  io.out(`  4. D1 migrations: apply ${migrations.length} from ${relative(appDir, migrationsDir) || "."} to each database (remote; already applied ones are skipped):\n${res.databases.map((d) => `       - wrangler d1 migrations apply ${d.name} --remote`).join("\n")}\n`)
  io.out(`  5. secrets: ${Policies.requiredSecrets.map((s) => `${s} ${secrets[s] ? `(from ${secrets[s].from})` : "(not given: must be set on the Worker already — checked with wrangler secret list)"}`).join(", ")}\n`)
  io.out(`  6. wrangler deploy ${envArgs.slice(0, -2).join(" ")} — Worker ${res.worker}, Durable Object ${res.durableObjects.join(", ")}, crons ${res.crons.join(", ")}${(effective.workflows ?? []).length > 0 ? `, workflows ${(effective.workflows ?? []).map((w) => `${w.name} (class ${w.class_name}; created or updated with the Worker)`).join(", ")}` : ""}\n`)
}

/** The dry run: wrangler bundles and validates the Worker into a scratch folder (`scratchDir` makes it); nothing is created or changed. */
const dryRunCheck = (runWrangler: RunWrangler, io: Io.Io, scratchDir: () => string, envArgs: ReadonlyArray<string>, adding: boolean, missing: ReadonlyArray<string>): number => {
  io.out(`\ndry run: nothing was created or changed. Running wrangler deploy --dry-run${adding ? " (on the config as it is: the read databases above are not in it yet)" : ""}:\n`)
  const scratch = scratchDir()
  const check = runWrangler(["deploy", "--dry-run", "--outdir", join(scratch, "bundle"), ...envArgs], { capture: true, allowFailure: true })
  io.out(check.output.split("\n").map((l) => `  | ${l}`).join("\n") + "\n")
  if (check.status !== 0) {
    io.err(`wrangler deploy --dry-run failed (exit ${check.status})\n`)
    return 1
  }
  io.out(`dry run passed: config checks, secrets ${missing.length ? `(${missing.join(", ")} to be checked on the Worker)` : "given"}, wrangler bundle and validation\n`)
  return 0
}

/** Whether every secret not given is set on the Worker (wrangler secret list); names those that are not. */
const secretsOnWorker = (runWrangler: RunWrangler, io: Io.Io, missing: ReadonlyArray<string>, envArgs: ReadonlyArray<string>, env: string | undefined): boolean => {
  const listed = runWrangler(["secret", "list", "--format", "json", ...envArgs], { capture: true, allowFailure: true })
  let names: Array<string> = []
  try {
    names = (JSON.parse(listed.output.slice(listed.output.indexOf("["))) as Array<{ readonly name: string }>).map((s) => s.name)
  } catch {}
  const absent = missing.filter((s) => !names.includes(s))
  if (absent.length > 0) {
    io.err(`refusing to deploy: ${absent.join(" and ")} ${absent.length > 1 ? "are" : "is"} not set. Give ${absent.length > 1 ? "them" : "it"} with --secrets-file or the environment, or run:\n${absent.map((s) => `  npx wrangler secret put ${s}${env ? ` --env ${env}` : ""}`).join("\n")}\n(FACTLINE_TOKENS: factline tokens create …; FACTLINE_SECRETS_KEY: openssl rand -base64 32)\n`)
    return false
  }
  return true
}

/** The read databases --read-databases adds, written into the config; its text after. */
const addReadDatabases = (io: Io.Io, configText: string, configPath: string, env: string | undefined, section: string, additions: ReadonlyArray<WranglerConfig.Database>): string => {
  let updated: string
  try {
    updated = WranglerConfig.addDatabases(configText, env, additions)
  } catch (error) {
    throw new DeployError(`${messageOf(error)}: add these to ${section}.d1_databases by hand, then deploy again:\n${additions.map((a) => `  ${JSON.stringify(a)}`).join(",\n")}`)
  }
  writeFileSync(configPath, updated)
  io.out(`added ${additions.map((a) => a.binding).join(", ")} to ${section} in ${configPath}: commit it\n`)
  return updated
}

/** Each queue created if missing; an existing one gets the policy's message retention. */
const createQueues = (runWrangler: RunWrangler, io: Io.Io, queues: ReadonlyArray<string>, envArgs: ReadonlyArray<string>): void => {
  for (const queue of queues) {
    const retention = Policies.retentionOf(queue)
    const retentionArgs = retention === undefined ? [] : ["--message-retention-period-secs", String(retention)]
    const created = runWrangler(["queues", "create", queue, ...retentionArgs, ...envArgs], { capture: true, allowFailure: true })
    if (created.status === 0) io.out(`queue ${queue}: created${retention === undefined ? "" : ` (message retention ${Policies.retentionText(retention)})`}\n`)
    else if (/already (exists|taken)|11009/i.test(created.output)) {
      // An existing queue keeps whatever retention it was created with: set the policy's.
      if (retention !== undefined) runWrangler(["queues", "update", queue, ...retentionArgs, ...envArgs], { capture: true })
      io.out(`queue ${queue}: exists${retention === undefined ? "" : ` (message retention set to ${Policies.retentionText(retention)})`}\n`)
    } else throw new DeployError(`could not create queue ${queue}:\n${created.output}`)
  }
}

/** Each D1 database created if missing; a database_id the config lacks (or has wrong) written into it. The config's text after. */
const createDatabases = (
  runWrangler: RunWrangler,
  io: Io.Io,
  databases: ReadonlyArray<{ readonly name: string; readonly binding: string; readonly id?: string | undefined }>,
  configText: string,
  configPath: string,
  envArgs: ReadonlyArray<string>
): string => {
  const listed = runWrangler(["d1", "list", "--json", ...envArgs], { capture: true })
  const existing = JSON.parse(listed.output.slice(listed.output.indexOf("["))) as Array<{ readonly name: string; readonly uuid: string }>
  for (const wanted of databases) {
    let database = existing.find((d) => d.name === wanted.name)
    if (!database) {
      const created = runWrangler(["d1", "create", wanted.name, ...envArgs], { capture: true })
      const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/.exec(created.output)?.[0]
      if (!uuid) throw new DeployError(`created D1 ${wanted.name} but found no id in:\n${created.output}`)
      database = { name: wanted.name, uuid }
      io.out(`D1 ${wanted.name} (${wanted.binding}): created (${uuid})\n`)
    } else io.out(`D1 ${wanted.name} (${wanted.binding}): exists (${database.uuid})\n`)
    if (wanted.id !== database.uuid) {
      const updated = WranglerConfig.setDatabaseId(configText, wanted.name, database.uuid)
      if (updated === undefined) throw new DeployError(`set "database_id": "${database.uuid}" for ${wanted.name} in ${configPath}, then deploy again`)
      writeFileSync(configPath, (configText = updated))
      io.out(`wrote database_id ${database.uuid} of ${wanted.name} into ${configPath}: commit it\n`)
    }
  }
  return configText
}

/** The payload bucket created if missing. */
const createBucket = (runWrangler: RunWrangler, io: Io.Io, bucketName: string, envArgs: ReadonlyArray<string>): void => {
  const bucket = runWrangler(["r2", "bucket", "create", bucketName, ...envArgs], { capture: true, allowFailure: true })
  if (bucket.status === 0) io.out(`R2 ${bucketName}: created\n`)
  else if (/already exists|10004/i.test(bucket.output)) io.out(`R2 ${bucketName}: exists\n`)
  else throw new DeployError(`could not create R2 bucket ${bucketName}:\n${bucket.output}`)
}

export const run = async (argv: ReadonlyArray<string>, io: Io.Io = Io.stdio, env: Environment = process.env): Promise<number> => {
  let scratch: string | undefined
  try {
    const { options } = Args.parse(argv, { values: ["env", "config", "secrets-file", "read-databases", "payload-retention-days"], switches: ["dry-run"], positionals: false })
    if (options.help) {
      io.out(`${usage}\n`)
      return 0
    }
    const dryRun = options["dry-run"] === true
    const configPath = resolve(options.config ?? "wrangler.jsonc")
    if (!existsSync(configPath)) throw new DeployError(`no wrangler config at ${configPath} (use --config)`)
    const appDir = dirname(configPath)
    let configText = readFileSync(configPath, "utf8")
    const config = WranglerConfig.parseJsonc(configText)
    const configured = WranglerConfig.forEnv(config, options.env)
    const deployed = options.env !== undefined
    const wrangler = wranglerOf(appDir)
    const wranglerEnv = { ...env, WRANGLER_SEND_METRICS: env.WRANGLER_SEND_METRICS ?? "false" }
    const envArgs = [...(options.env ? ["--env", options.env] : []), "--config", configPath]
    const runWrangler = wranglerRunner(appDir, wrangler, wranglerEnv)

    const target = options.env ? `environment ${options.env}` : "the top-level configuration (no --env)"
    const section = options.env ? `env.${options.env}` : "the top level"
    io.out(`factline deploy${dryRun ? " --dry-run" : ""}: ${target} of ${relative(process.cwd(), configPath) || configPath}\n`)
    // An app whose top level binds workflows runs them: each environment must bind them too (not inherited).
    const workflows = (config.workflows ?? []).some((w) => w.binding === Policies.bindings.workflows.binding)
    const problems = WranglerConfig.check(configured, { deployed, workflows })
    if (problems.length > 0) {
      io.err(`config checks failed (${problems.length}):\n${problems.map((p) => `  - ${p}`).join("\n")}\n`)
      return 1
    }

    // The read databases --read-databases adds (written into the config before anything is created; not in a dry run).
    const additions = readDatabaseAdditions(options["read-databases"], configured)
    const effective = { ...configured, d1_databases: [...(configured.d1_databases ?? []), ...additions] }
    const retentionDays = WranglerConfig.parseRetentionDays(options["payload-retention-days"] ?? effective.vars?.[Policies.payloads.retentionVar] ?? Policies.payloads.defaultRetentionDays)
    if (retentionDays === undefined) throw new DeployError(`--payload-retention-days must be a whole number of days, at least 1`)

    const res = WranglerConfig.resources(effective)
    // WranglerConfig.check above refused a database without its database_name and the bucket without its bucket_name.
    const databases = res.databases.map((d) => ({ ...d, name: required(d.name, `d1_databases[${d.binding}].database_name`) }))
    const bucketName = required(res.bucket, `r2_buckets[${Policies.bindings.payloads}].bucket_name`)
    const groups = Policies.queueGroupsOf(effective)
    const grouped = Policies.queues.filter((q) => q.grouped).map((q) => q.queue)
    io.out(`config checks: passed (${res.queues.length} queues with the policy's consumer settings: ${grouped.join(", ")} in ${groups} tenant group${groups > 1 ? "s" : ""} each, one DLQ per purpose; D1 ${Policies.bindings.database} and ${res.readDatabases} read database${res.readDatabases > 1 ? "s" : ""}${res.platformIsReadDatabase0 ? ` (read database 0 is ${Policies.bindings.database})` : ""} numbered without gaps, one migrations_dir; R2 ${Policies.bindings.payloads}, Durable Objects ${Policies.bindings.ledger.className} and ${Policies.bindings.limiter.className}, cron ${Policies.bindings.crons.join(", ")})\n`)

    // WranglerConfig.check above refused a config without DB or its migrations_dir.
    const migrationsDir = resolve(appDir, res.databases[0]?.migrationsDir ?? "")
    const migrations = existsSync(migrationsDir) ? readdirSync(migrationsDir).filter((f) => f.endsWith(".sql")) : []
    const secrets = readSecrets(options["secrets-file"], env)
    const invalid = secretProblems(secrets)
    if (invalid.length > 0) {
      io.err(`secrets refused:\n${invalid.map((p) => `  - ${p}`).join("\n")}\n`)
      return 1
    }
    const provided = Object.keys(secrets)
    const missing = Policies.requiredSecrets.filter((s) => !provided.includes(s))

    printPlan(io, { dryRun, section, configPath, readDatabases: options["read-databases"], additions, effective, res, groups, retentionDays, migrations, migrationsDir, appDir, secrets, envArgs })
    if (dryRun) return dryRunCheck(runWrangler, io, () => (scratch = mkdtempSync(join(tmpdir(), "factline-deploy-"))), envArgs, additions.length > 0, missing)

    // Refuse before creating anything when a secret is neither given nor set on the Worker.
    if (missing.length > 0 && !secretsOnWorker(runWrangler, io, missing, envArgs, options.env)) return 1

    if (additions.length > 0) configText = addReadDatabases(io, configText, configPath, options.env, section, additions)
    createQueues(runWrangler, io, res.queues, envArgs)
    configText = createDatabases(runWrangler, io, databases, configText, configPath, envArgs)

    createBucket(runWrangler, io, bucketName, envArgs)
    payloadLifecycle(runWrangler, io, bucketName, retentionDays, envArgs)

    for (const database of databases) runWrangler(["d1", "migrations", "apply", database.name, "--remote", ...envArgs])

    const deployArgs = ["deploy", ...envArgs]
    if (provided.length > 0) {
      scratch = mkdtempSync(join(tmpdir(), "factline-deploy-"))
      const file = join(scratch, "secrets.json")
      writeFileSync(file, JSON.stringify(Object.fromEntries(provided.map((s) => [s, secrets[s]!.value]))), { mode: 0o600 })
      deployArgs.push("--secrets-file", file)
    }
    runWrangler(deployArgs)
    io.out(`deployed ${res.worker}. Watch: GET /v1/queues/health (platform token), the DLQs, D1 and queue metrics in the dashboard.\n`)
    return 0
  } catch (error) {
    const message = error instanceof Error ? error.message : ""
    if (error instanceof DeployError || error instanceof Args.ArgsError || error instanceof SyntaxError || /wrangler config has no env/.test(message)) {
      io.err(`deploy: ${message}${error instanceof Args.ArgsError ? `\n\n${usage}` : ""}\n`)
      return 1
    }
    throw error
  } finally {
    if (scratch) rmSync(scratch, { recursive: true, force: true })
  }
}
