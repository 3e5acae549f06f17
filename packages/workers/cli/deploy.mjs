/**
 * `factline deploy [--env staging|production] [--dry-run]`: provisions and deploys a factline app with
 * wrangler. In order: checks wrangler.jsonc against the platform (every queue and DLQ with the policy's
 * consumer settings, D1, R2, the ledger Durable Object, the cron, no local-only setting); refuses without
 * the required secrets; creates what is missing — every queue and DLQ, the D1 database (its id written
 * back into wrangler.jsonc), the R2 bucket — each creation idempotent; applies the D1 migrations remotely;
 * then `wrangler deploy`, passing the secrets it was given with the deploy.
 *
 * `--dry-run` prints that plan and runs `wrangler deploy --dry-run` (bundling and config validation by
 * wrangler), touching no account. It does not manage DNS, routes or access policies.
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join, relative, resolve } from "node:path"
import * as Args from "./Args.mjs"
import * as Policies from "./Policies.mjs"
import * as Tokens from "./tokens.mjs"
import * as WranglerConfig from "./WranglerConfig.mjs"

export const usage = `usage: factline deploy [options]

  --env NAME            the wrangler environment to deploy (env.NAME in wrangler.jsonc), e.g. staging, production
  --dry-run             print the plan and run 'wrangler deploy --dry-run'; touches no Cloudflare account
  --config PATH         the wrangler config (default: wrangler.jsonc)
  --secrets-file PATH   FACTLINE_TOKENS and FACTLINE_SECRETS_KEY to deploy with (dotenv or JSON; never commit it);
                        they may also come from the environment, or be set already (wrangler secret put)

Cloudflare credentials: 'wrangler login', or CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID in CI.`

class DeployError extends Error {}

/** Secrets from a dotenv or JSON file, then the environment (which wins, as with wrangler's own --secrets-file). */
const readSecrets = (file, env) => {
  const found = {}
  if (file !== undefined) {
    if (!existsSync(file)) throw new DeployError(`--secrets-file ${file} does not exist`)
    const text = readFileSync(file, "utf8")
    if (file.endsWith(".json")) Object.assign(found, JSON.parse(text))
    else {
      for (const line of text.split("\n")) {
        const m = /^\s*([A-Z0-9_]+)\s*=\s*(.*)$/.exec(line)
        if (m) found[m[1]] = m[2].trim().replace(/^'(.*)'$/s, "$1").replace(/^"(.*)"$/s, "$1")
      }
    }
  }
  const result = {}
  for (const name of Policies.requiredSecrets) {
    if (env[name] !== undefined && env[name] !== "") result[name] = { value: env[name], from: "environment" }
    else if (found[name] !== undefined && found[name] !== "") result[name] = { value: found[name], from: file }
  }
  return result
}

/** What each required secret must look like; a malformed one would refuse every request or every webhook. */
const secretProblems = (secrets) => {
  const problems = []
  const tokens = secrets.FACTLINE_TOKENS?.value
  if (tokens !== undefined) {
    try {
      if (Tokens.parse(tokens).length === 0) problems.push("FACTLINE_TOKENS has no token: every request would be refused")
      else {
        const refused = Tokens.refusedByAuth(tokens)
        if (refused !== undefined) problems.push(`Auth refuses FACTLINE_TOKENS, so every request would be refused: ${refused}`)
      }
    } catch (error) {
      problems.push(error.message.replace("the current FACTLINE_TOKENS", "FACTLINE_TOKENS"))
    }
  }
  const key = secrets.FACTLINE_SECRETS_KEY?.value
  if (key !== undefined && Buffer.from(key, "base64").length !== 32) problems.push("FACTLINE_SECRETS_KEY must be base64 of 32 random bytes (openssl rand -base64 32)")
  return problems
}

/** The wrangler CLI the app installed (its own version), run with this Node. */
const wranglerOf = (cwd) => {
  try {
    return join(dirname(createRequire(join(cwd, "package.json")).resolve("wrangler/package.json")), "bin", "wrangler.js")
  } catch {
    throw new DeployError("wrangler is not installed here: npm install --save-dev wrangler")
  }
}

export const run = async (argv, io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) }, env = process.env) => {
  let scratch
  try {
    const { options } = Args.parse(argv, { values: ["env", "config", "secrets-file"], switches: ["dry-run"], positionals: false })
    if (options.help) {
      io.out(`${usage}\n`)
      return 0
    }
    const configPath = resolve(options.config ?? "wrangler.jsonc")
    if (!existsSync(configPath)) throw new DeployError(`no wrangler config at ${configPath} (use --config)`)
    const appDir = dirname(configPath)
    const configText = readFileSync(configPath, "utf8")
    const config = WranglerConfig.parseJsonc(configText)
    const effective = WranglerConfig.forEnv(config, options.env)
    const deployed = options.env !== undefined
    const wrangler = wranglerOf(appDir)
    const wranglerEnv = { ...env, WRANGLER_SEND_METRICS: env.WRANGLER_SEND_METRICS ?? "false" }
    const envArgs = [...(options.env ? ["--env", options.env] : []), "--config", configPath]
    const runWrangler = (args, { capture = false, allowFailure = false } = {}) => {
      const result = spawnSync(process.execPath, [wrangler, ...args], { cwd: appDir, env: { ...wranglerEnv, CI: "true" }, encoding: "utf8", stdio: capture ? "pipe" : "inherit" })
      const output = `${result.stdout ?? ""}${result.stderr ?? ""}`
      if (result.status !== 0 && !allowFailure) throw new DeployError(`wrangler ${args.join(" ")} failed (exit ${result.status})${capture ? `:\n${output}` : ""}`)
      return { status: result.status, output }
    }

    const target = options.env ? `environment ${options.env}` : "the top-level configuration (no --env)"
    io.out(`factline deploy${options["dry-run"] ? " --dry-run" : ""}: ${target} of ${relative(process.cwd(), configPath) || configPath}\n`)
    const problems = WranglerConfig.check(effective, { deployed })
    if (problems.length > 0) {
      io.err(`config checks failed (${problems.length}):\n${problems.map((p) => `  - ${p}`).join("\n")}\n`)
      return 1
    }
    const res = WranglerConfig.resources(effective)
    io.out(`config checks: passed (${Policies.queues.length} queues and their DLQs with the policy's consumer settings, D1 ${Policies.bindings.database}, R2 ${Policies.bindings.payloads}, Durable Object ${Policies.bindings.ledger.className}, cron ${Policies.bindings.crons.join(", ")})\n`)

    const migrationsDir = resolve(appDir, res.database.migrationsDir)
    const migrations = existsSync(migrationsDir) ? readdirSync(migrationsDir).filter((f) => f.endsWith(".sql")) : []
    const secrets = readSecrets(options["secrets-file"], env)
    const invalid = secretProblems(secrets)
    if (invalid.length > 0) {
      io.err(`secrets refused:\n${invalid.map((p) => `  - ${p}`).join("\n")}\n`)
      return 1
    }
    const provided = Object.keys(secrets)
    const missing = Policies.requiredSecrets.filter((s) => !provided.includes(s))

    io.out(`\nplan — worker ${res.worker}${res.accountId ? ` in account ${res.accountId}` : " (account: CLOUDFLARE_ACCOUNT_ID or wrangler login)"}:\n`)
    io.out(`  1. queues (create if missing, ${res.queues.length}):\n${res.queues.map((q) => `       - ${q}`).join("\n")}\n`)
    io.out(`  2. D1 database ${res.database.name} (binding ${Policies.bindings.database}): create if missing${res.database.id === WranglerConfig.unprovisionedDatabaseId ? "; its database_id is written into the config" : ` (database_id ${res.database.id})`}\n`)
    io.out(`  3. R2 bucket ${res.bucket} (binding ${Policies.bindings.payloads}): create if missing\n`)
    io.out(`  4. D1 migrations: apply ${migrations.length} from ${relative(appDir, migrationsDir) || "."} to ${res.database.name} (remote; already applied ones are skipped)\n`)
    io.out(`  5. secrets: ${Policies.requiredSecrets.map((s) => `${s} ${secrets[s] ? `(from ${secrets[s].from})` : "(not given: must be set on the Worker already — checked with wrangler secret list)"}`).join(", ")}\n`)
    io.out(`  6. wrangler deploy ${envArgs.slice(0, -2).join(" ")} — Worker ${res.worker}, Durable Object ${res.durableObjects.join(", ")}, crons ${res.crons.join(", ")}\n`)

    if (options["dry-run"]) {
      io.out(`\ndry run: nothing was created or changed. Running wrangler deploy --dry-run:\n`)
      scratch = mkdtempSync(join(tmpdir(), "factline-deploy-"))
      const check = runWrangler(["deploy", "--dry-run", "--outdir", join(scratch, "bundle"), ...envArgs], { capture: true, allowFailure: true })
      io.out(check.output.split("\n").map((l) => `  | ${l}`).join("\n") + "\n")
      if (check.status !== 0) {
        io.err(`wrangler deploy --dry-run failed (exit ${check.status})\n`)
        return 1
      }
      io.out(`dry run passed: config checks, secrets ${missing.length ? `(${missing.join(", ")} to be checked on the Worker)` : "given"}, wrangler bundle and validation\n`)
      return 0
    }

    // Refuse before creating anything when a secret is neither given nor set on the Worker.
    if (missing.length > 0) {
      const listed = runWrangler(["secret", "list", "--format", "json", ...envArgs], { capture: true, allowFailure: true })
      let names = []
      try {
        names = JSON.parse(listed.output.slice(listed.output.indexOf("["))).map((s) => s.name)
      } catch {}
      const absent = missing.filter((s) => !names.includes(s))
      if (absent.length > 0) {
        io.err(`refusing to deploy: ${absent.join(" and ")} ${absent.length > 1 ? "are" : "is"} not set. Give ${absent.length > 1 ? "them" : "it"} with --secrets-file or the environment, or run:\n${absent.map((s) => `  npx wrangler secret put ${s}${options.env ? ` --env ${options.env}` : ""}`).join("\n")}\n(FACTLINE_TOKENS: factline tokens create …; FACTLINE_SECRETS_KEY: openssl rand -base64 32)\n`)
        return 1
      }
    }

    for (const queue of res.queues) {
      const created = runWrangler(["queues", "create", queue], { capture: true, allowFailure: true })
      if (created.status === 0) io.out(`queue ${queue}: created\n`)
      else if (/already (exists|taken)|11009/i.test(created.output)) io.out(`queue ${queue}: exists\n`)
      else throw new DeployError(`could not create queue ${queue}:\n${created.output}`)
    }

    const listed = runWrangler(["d1", "list", "--json"], { capture: true })
    const databases = JSON.parse(listed.output.slice(listed.output.indexOf("[")))
    let database = databases.find((d) => d.name === res.database.name)
    if (!database) {
      const created = runWrangler(["d1", "create", res.database.name], { capture: true })
      const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/.exec(created.output)?.[0]
      if (!uuid) throw new DeployError(`created D1 ${res.database.name} but found no id in:\n${created.output}`)
      database = { name: res.database.name, uuid }
      io.out(`D1 ${res.database.name}: created (${uuid})\n`)
    } else io.out(`D1 ${res.database.name}: exists (${database.uuid})\n`)
    if (res.database.id !== database.uuid) {
      const pattern = new RegExp(`("database_name"\\s*:\\s*"${res.database.name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}"\\s*,\\s*"database_id"\\s*:\\s*")[^"]*(")`)
      if (!pattern.test(configText)) throw new DeployError(`set "database_id": "${database.uuid}" for ${res.database.name} in ${configPath}, then deploy again`)
      writeFileSync(configPath, configText.replace(pattern, `$1${database.uuid}$2`))
      io.out(`wrote database_id ${database.uuid} into ${configPath}: commit it\n`)
    }

    const bucket = runWrangler(["r2", "bucket", "create", res.bucket], { capture: true, allowFailure: true })
    if (bucket.status === 0) io.out(`R2 ${res.bucket}: created\n`)
    else if (/already exists|10004/i.test(bucket.output)) io.out(`R2 ${res.bucket}: exists\n`)
    else throw new DeployError(`could not create R2 bucket ${res.bucket}:\n${bucket.output}`)

    runWrangler(["d1", "migrations", "apply", res.database.name, "--remote", ...envArgs])

    const deployArgs = ["deploy", ...envArgs]
    if (provided.length > 0) {
      scratch = mkdtempSync(join(tmpdir(), "factline-deploy-"))
      const file = join(scratch, "secrets.json")
      writeFileSync(file, JSON.stringify(Object.fromEntries(provided.map((s) => [s, secrets[s].value]))), { mode: 0o600 })
      deployArgs.push("--secrets-file", file)
    }
    runWrangler(deployArgs)
    io.out(`deployed ${res.worker}. Watch: GET /v1/queues/health (platform token), the DLQs, D1 and queue metrics in the dashboard.\n`)
    return 0
  } catch (error) {
    if (error instanceof DeployError || error instanceof Args.ArgsError || error instanceof SyntaxError || /wrangler config has no env/.test(error?.message ?? "")) {
      io.err(`deploy: ${error.message}${error instanceof Args.ArgsError ? `\n\n${usage}` : ""}\n`)
      return 1
    }
    throw error
  } finally {
    if (scratch) rmSync(scratch, { recursive: true, force: true })
  }
}
