/**
 * `factline tokens create | list | revoke`: API tokens for the platform's HTTP API, kept as the
 * `FACTLINE_TOKENS` setting — a JSON array of `{ name, sha256, tenant_id, scopes, created_at }`, hashes
 * only (see `http/Auth.ts`). A token is printed once, when created, and never stored; `list` shows names,
 * tenants, scopes and creation times, never a secret.
 *
 * Where the current value lives is the caller's choice, and the command only rewrites what it read:
 * - `--file .dev.vars` (any dotenv file): its `FACTLINE_TOKENS='…'` line is updated in place (local).
 * - `--file tokens.json`: a plain JSON array (keep it beside your deploy config for production: hashes only).
 * - neither: the current value is read from the `FACTLINE_TOKENS` environment variable and the updated
 *   value is printed, with the `wrangler secret put` command that installs it (secrets cannot be read back).
 *
 * Every value it writes or prints is first parsed with the parser Auth.ts uses (`@factline/workers/tokens`):
 * a value Auth would refuse — which locks out every token, the new one included — is never written (exit 1,
 * with Auth's reason).
 *
 * It does not talk to Cloudflare: installing a value in production is `wrangler secret put FACTLINE_TOKENS`
 * (or `factline deploy`, which passes it with the deploy).
 */
import { createHash, randomBytes } from "node:crypto"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { Result } from "effect"
import * as TokenConfig from "@factline/workers/tokens"
import * as Args from "./Args.js"
import { type Io, stdio } from "./Io.js"

/** The scopes http/Auth.ts knows. */
export const scopes = TokenConfig.Scope.literals
/** The tenant id pattern of @factline/schemas' TenantId. */
export const tenantPattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/
const namePattern = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/
/** Recognisable by secret scanners: `fl_` then 43 base62 characters (256 random bits) — `fl_[0-9A-Za-z]{43}`. */
export const tokenPattern = /^fl_[0-9A-Za-z]{43}$/

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** A new token: 32 random bytes (256 bits of entropy) in base62, after the `fl_` prefix. */
export const generate = () => {
  let n = BigInt(`0x${randomBytes(32).toString("hex")}`)
  let digits = ""
  for (let i = 0; i < 43; i++) {
    digits = base62[Number(n % 62n)] + digits
    n /= 62n
  }
  return `fl_${digits}`
}

export const sha256 = (token: string): string => createHash("sha256").update(token, "utf8").digest("hex")

/** An entry of FACTLINE_TOKENS (what Auth.ts decodes). */
export interface Entry {
  readonly name?: string
  readonly sha256: string
  readonly tenant_id: string
  readonly scopes: ReadonlyArray<string>
  readonly created_at?: string
}

/** A token entry for FACTLINE_TOKENS (what Auth.ts decodes); the token itself is not in it. */
export const entryFor = (token: string, { name, tenant, scopes: granted, now = new Date() }: { readonly name: string; readonly tenant: string; readonly scopes: ReadonlyArray<string>; readonly now?: Date }) => ({
  name,
  sha256: sha256(token),
  tenant_id: tenant,
  scopes: granted,
  created_at: now.toISOString().replace(/\.\d{3}Z$/, "Z")
})

export class UsageError extends Error {}

/** Parses a FACTLINE_TOKENS value; refuses anything Auth.ts would refuse (it would lock everyone out). */
export const parse = (value: string | undefined): ReadonlyArray<Entry> => {
  if (value === undefined || value.trim() === "") return []
  let entries: unknown
  try {
    entries = JSON.parse(value)
  } catch {
    throw new UsageError("the current FACTLINE_TOKENS is not JSON; fix or remove it first")
  }
  if (!Array.isArray(entries)) throw new UsageError("the current FACTLINE_TOKENS is not a JSON array")
  for (const [i, e] of entries.entries()) {
    if (typeof e !== "object" || e === null || !/^[0-9a-f]{64}$/.test(String(e.sha256 ?? "")) || !tenantPattern.test(String(e.tenant_id ?? "")) || !Array.isArray(e.scopes)) {
      throw new UsageError(`the current FACTLINE_TOKENS entry ${i} is not { sha256, tenant_id, scopes }`)
    }
  }
  return entries as ReadonlyArray<Entry>
}

export const serialize = (entries: ReadonlyArray<Entry>): string => JSON.stringify(entries)

/** Why Auth refuses `value` (naming each entry at fault, never its hash), or undefined when Auth accepts it. */
export const refusedByAuth = (value: string): string | undefined => {
  const parsed = TokenConfig.parse(value)
  if (Result.isSuccess(parsed)) return undefined
  let entries: unknown
  try {
    entries = JSON.parse(value)
  } catch {
    return parsed.failure
  }
  // Each entry checked alone with the same parser, to name the ones at fault.
  const atFault = Array.isArray(entries)
    ? entries.flatMap((e: { name?: unknown; tenant_id?: unknown; scopes?: unknown; created_at?: unknown } | null, i) => Result.isFailure(TokenConfig.parse(JSON.stringify([e])))
      ? [`entry ${i} ${e?.name ?? "(unnamed)"} ${JSON.stringify({ tenant_id: e?.tenant_id, scopes: e?.scopes, created_at: e?.created_at })}`]
      : [])
    : []
  return atFault.length > 0 ? `${parsed.failure}; at fault: ${atFault.join("; ")}` : parsed.failure
}

/** Auth's table of `value`, or a UsageError with Auth's reason: a value Auth refuses would lock everyone out. */
export const checkWithAuth = (value: string) => {
  const refused = refusedByAuth(value)
  if (refused !== undefined) {
    throw new UsageError(`refusing to write FACTLINE_TOKENS: Auth would refuse the result and then every request, this token's included — ${refused}. Fix or revoke the entry at fault first (factline tokens revoke NAME); nothing was written`)
  }
  return Result.getOrThrow(TokenConfig.parse(value))
}

/** Why giving `platform` to this token is probably a mistake: it also acts within a tenant, or its tenant has tenant tokens. */
const platformWarning = (entries: ReadonlyArray<Entry>, tenant: string, granted: ReadonlyArray<string>) => {
  if (!granted.includes("platform")) return undefined
  const tenantScoped = (list: ReadonlyArray<string>) => list.some((s) => (TokenConfig.tenantScopes as ReadonlyArray<string>).includes(s))
  const isTenants = tenantScoped(granted) || entries.some((e) => e.tenant_id === tenant && Array.isArray(e.scopes) && tenantScoped(e.scopes))
  return isTenants
    ? `warning: 'platform' acts across every tenant (a projection rebuild replays all tenants' facts), not only ${tenant}'s; it is for the platform's operators, never a tenant's token — give operators their own (e.g. --tenant factline --scopes platform)\n`
    : undefined
}

// ---- where the value is read from and written to --------------------------------------------------------

const dotenvLine = /^FACTLINE_TOKENS=(.*)$/m

const unquote = (raw: string) => {
  const v = raw.trim()
  if ((v.startsWith("'") && v.endsWith("'")) || (v.startsWith('"') && v.endsWith('"'))) return v.slice(1, -1)
  return v
}

/** Where FACTLINE_TOKENS was read from (`value`), and is written back to. */
export type Store =
  | { readonly kind: "env"; readonly value: string | undefined }
  | { readonly kind: "json" | "dotenv"; readonly file: string; readonly value: string | undefined; readonly text: string }

/** Reads the current value from `file` (dotenv or .json) or from the environment. */
export const readStore = (file: string | undefined, env: NodeJS.ProcessEnv = process.env): Store => {
  if (file === undefined) return { kind: "env", value: env.FACTLINE_TOKENS }
  if (!existsSync(file)) return { kind: file.endsWith(".json") ? "json" : "dotenv", file, value: undefined, text: "" }
  const text = readFileSync(file, "utf8")
  if (file.endsWith(".json")) return { kind: "json", file, value: text, text }
  const line = dotenvLine.exec(text)
  return { kind: "dotenv", file, value: line ? unquote(line[1] ?? "") : undefined, text }
}

/** Writes the updated value where it was read from (the environment: nowhere; the caller prints it). */
export const writeStore = (store: Store, value: string): boolean => {
  if (store.kind === "env") return false
  if (store.kind === "json") {
    writeFileSync(store.file, `${JSON.stringify(JSON.parse(value), null, 2)}\n`)
    return true
  }
  const line = `FACTLINE_TOKENS='${value}'`
  const text = dotenvLine.test(store.text)
    ? store.text.replace(dotenvLine, () => line)
    : `${store.text}${store.text === "" || store.text.endsWith("\n") ? "" : "\n"}${line}\n`
  writeFileSync(store.file, text)
  return true
}

// ---- the commands -----------------------------------------------------------------------------------------

export const usage = `usage: factline tokens <command> [options]

  create --tenant T --scopes read,events:write --name NAME   create a token: printed once, its hash added
  list                                                        names, tenants, scopes, created (never a secret)
  revoke NAME                                                 remove the token NAME

  --file PATH      where FACTLINE_TOKENS is kept: a dotenv file (.dev.vars) or a .json array
                   (default: read the FACTLINE_TOKENS environment variable and print the new value)
  --env NAME       the wrangler environment the printed 'wrangler secret put' command targets
  --json           machine-readable output

scopes: ${scopes.join(", ")} ('platform' is for the platform's operators only, never a tenant's token)
rotation: create NAME-2, deploy both, move the client to the new token, then revoke NAME.`

const secretPutHint = (value: string, env: string | undefined) =>
  `printf '%s' '${value}' | npx wrangler secret put FACTLINE_TOKENS${env ? ` --env ${env}` : ""}`

/** Runs `tokens <argv>`; returns the exit code. Output goes to `io` (stdout/stderr writers). */
export const run = async (argv: ReadonlyArray<string>, io: Io = stdio, env: NodeJS.ProcessEnv = process.env): Promise<number> => {
  try {
    const { options, positional } = Args.parse(argv, { values: ["file", "name", "tenant", "scopes", "env"], switches: ["json"] })
    const [command, ...rest] = positional
    if (options.help || command === undefined || command === "help") {
      io.out(`${usage}\n`)
      return command === undefined && !options.help ? 1 : 0
    }
    const store = readStore(options.file, env)
    const entries = parse(store.value)
    const where = store.kind === "env" ? "FACTLINE_TOKENS (environment)" : store.file

    if (command === "list") {
      const current = TokenConfig.parse(store.value)
      if (store.value !== undefined && store.value.trim() !== "" && Result.isFailure(current)) io.err(`tokens: warning: Auth refuses the current value, so every request is refused — ${current.failure}\n`)
      const rows = entries.map((e) => ({ name: e.name ?? "(unnamed)", tenant_id: e.tenant_id, scopes: e.scopes, created_at: e.created_at ?? null }))
      if (options.json) io.out(`${JSON.stringify(rows, null, 2)}\n`)
      else if (rows.length === 0) io.out(`no tokens in ${where}\n`)
      else {
        const table = [["NAME", "TENANT", "SCOPES", "CREATED"], ...rows.map((r) => [r.name, r.tenant_id, r.scopes.join(","), r.created_at ?? "-"])]
        const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)))
        io.out(table.map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n") + "\n")
      }
      return 0
    }

    let updated: ReadonlyArray<Entry>
    let created: { readonly token: string; readonly entry: Entry } | undefined
    let warning: string | undefined
    if (command === "create") {
      const name = options.name
      const tenant = options.tenant
      const granted = (options.scopes ?? "").split(",").map((s) => s.trim()).filter(Boolean)
      if (!name || !namePattern.test(name)) throw new UsageError("--name is required: 1-64 letters, digits, '_', '.', ':' or '-' (e.g. billing)")
      if (!tenant || !tenantPattern.test(tenant)) throw new UsageError("--tenant is required: 1-64 letters, digits, '_', '.' or '-'")
      if (granted.length === 0) throw new UsageError(`--scopes is required: a comma-separated list of ${scopes.join(", ")}`)
      const unknown = granted.filter((s) => !(scopes as ReadonlyArray<string>).includes(s))
      if (unknown.length > 0) throw new UsageError(`unknown scope(s) ${unknown.join(", ")}; known: ${scopes.join(", ")}`)
      if (entries.some((e) => e.name === name)) throw new UsageError(`a token named ${name} already exists in ${where}; revoke it first, or create ${name}-2 to rotate`)
      const token = generate()
      const entry = entryFor(token, { name, tenant, scopes: [...new Set(granted)] })
      updated = [...entries, entry]
      created = { token, entry }
      warning = platformWarning(entries, tenant, entry.scopes)
    } else if (command === "revoke") {
      const name = rest[0] ?? options.name
      if (!name) throw new UsageError("usage: factline tokens revoke NAME")
      if (!entries.some((e) => e.name === name)) throw new UsageError(`no token named ${name} in ${where} (see: factline tokens list)`)
      updated = entries.filter((e) => e.name !== name)
    } else {
      throw new UsageError(`unknown command ${command}\n\n${usage}`)
    }

    const value = serialize(updated)
    const table = checkWithAuth(value)
    if (created && table.get(created.entry.sha256)?.tenantId !== created.entry.tenant_id) {
      throw new UsageError(`refusing to write FACTLINE_TOKENS: Auth would not authenticate the new token as ${created.entry.tenant_id}; nothing was written`)
    }
    if (warning) io.err(`tokens: ${warning}`)
    const written = writeStore(store, value)
    if (options.json) {
      io.out(`${JSON.stringify({ ...(created ? { token: created.token, entry: created.entry } : { revoked: rest[0] ?? options.name }), FACTLINE_TOKENS: value, written: written && store.kind !== "env" ? store.file : null })}\n`)
      return 0
    }
    if (created) {
      io.out(`token ${created.entry.name} for tenant ${created.entry.tenant_id} (${created.entry.scopes.join(", ")}), shown once — store it now:\n\n  ${created.token}\n\n`)
    } else {
      io.out(`revoked ${rest[0] ?? options.name}: its hash is no longer in FACTLINE_TOKENS\n\n`)
    }
    io.out(written
      ? `updated FACTLINE_TOKENS in ${store.kind === "env" ? "" : store.file} (${updated.length} token(s); restart wrangler dev to load it)\n`
      : `FACTLINE_TOKENS (hashes only) is now:\n\n${value}\n\n`)
    io.out(`to install it on a deployed Worker:\n  ${secretPutHint(value, options.env)}\n`)
    return 0
  } catch (error) {
    if (error instanceof UsageError || error instanceof Args.ArgsError) {
      io.err(`tokens: ${error.message}\n`)
      return 1
    }
    throw error
  }
}
