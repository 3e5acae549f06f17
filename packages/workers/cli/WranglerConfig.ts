/**
 * wrangler.jsonc as the platform sees it: parsed (JSONC), narrowed to one wrangler environment, checked
 * against the platform's queues and bindings (`Policies.ts`), and generated for a new app. It reads and
 * writes files only; talking to Cloudflare is `deploy.ts`'s job.
 */
import * as Policies from "./Policies.js"
import { type Config, type Database, parseJsonc, renderValue, unprovisionedDatabaseId } from "./WranglerText.js"

export { type Config, type Consumer, type Database, parseJsonc, platformBindings, render, unprovisionedDatabaseId } from "./WranglerText.js"

/** Keys wrangler does not inherit from the top level into an environment (bindings, vars). */
const notInherited = ["vars", "durable_objects", "d1_databases", "r2_buckets", "queues", "kv_namespaces", "services", "analytics_engine_datasets", "ratelimits", "workflows"]

/**
 * The configuration wrangler deploys for `env` (undefined: the top level): inherited keys fall back to the
 * top level, bindings come only from the environment's own section, the name gets wrangler's `-<env>` suffix.
 */
export const forEnv = (config: Config, env: string | undefined): Config => {
  if (env === undefined) return { ...config, env: undefined }
  const section = config.env?.[env]
  if (section === undefined) throw new Error(`wrangler config has no env.${env} section (declared: ${Object.keys(config.env ?? {}).join(", ") || "none"})`)
  const inherited = Object.fromEntries(Object.entries(config).filter(([k]) => k !== "env" && !notInherited.includes(k)))
  return { ...inherited, name: `${config.name}-${env}`, ...section, env: undefined }
}

/** Every queue the configuration produces to or consumes from, in a stable order. */
export const queueNames = (effective: Config): Array<string> => {
  const names = [...(effective.queues?.producers ?? []).map((p) => p.queue), ...(effective.queues?.consumers ?? []).map((c) => c.queue)]
  return [...new Set(names)]
}

/**
 * What is missing or wrong for the platform to run with this (environment's) configuration: every
 * platform queue and DLQ produced to and consumed with the policy's settings, D1, R2, the ledger Durable
 * Object with its SQLite migration, the cron, and no local-only setting. An empty list means it passes.
 */
export const check = (effective: Config, { deployed = false, workflows = false }: {
  readonly deployed?: boolean
  /** The app runs workflows (its top level declares the entry): every environment must bind them too. */
  readonly workflows?: boolean
} = {}): Array<string> => {
  const problems: Array<string> = []
  const producers = effective.queues?.producers ?? []
  const consumers = effective.queues?.consumers ?? []
  const hasProducer = (queue: string, binding: string) => producers.some((p) => p.queue === queue && p.binding === binding)
  const groups = Policies.queueGroupsOf(effective)
  for (const q of Policies.queues) {
    for (const { queue, binding } of Policies.physicalQueues(q, groups)) {
      if (!hasProducer(queue, binding)) problems.push(`queues.producers: missing { queue: "${queue}", binding: "${binding}" }`)
      const consumer = consumers.find((c) => c.queue === queue)
      const expected = { max_batch_size: q.maxBatchSize, max_batch_timeout: q.maxBatchTimeoutSeconds, max_retries: q.maxRetries, dead_letter_queue: q.deadLetterQueue }
      if (!consumer) problems.push(`queues.consumers: missing the consumer of ${queue}`)
      else for (const [key, value] of Object.entries(expected)) {
        if (consumer[key] !== value) problems.push(`queues.consumers[${queue}].${key} is ${JSON.stringify(consumer[key])}, the policy says ${JSON.stringify(value)}`)
      }
    }
    if (!hasProducer(q.deadLetterQueue, q.deadLetterBinding)) problems.push(`queues.producers: missing { queue: "${q.deadLetterQueue}", binding: "${q.deadLetterBinding}" }`)
    const deadLetterConsumer = consumers.find((c) => c.queue === q.deadLetterQueue)
    if (!deadLetterConsumer) problems.push(`queues.consumers: missing the consumer of ${q.deadLetterQueue} (dead letters are stored from it)`)
    else if (deadLetterConsumer.max_retries !== Policies.deadLetterConsumer.maxRetries) {
      // Fewer deliveries and a dead letter D1 refuses is dropped before it is spilled to R2.
      problems.push(`queues.consumers[${q.deadLetterQueue}].max_retries is ${JSON.stringify(deadLetterConsumer.max_retries)}, the policy says ${Policies.deadLetterConsumer.maxRetries}`)
    }
  }
  const rawGroups = effective.vars?.FACTLINE_QUEUE_GROUPS
  const groupCount = Number(rawGroups)
  if (rawGroups !== undefined && rawGroups !== "" && !(Number.isInteger(groupCount) && groupCount >= 1 && groupCount <= Policies.maxQueueGroups)) {
    problems.push(`vars.FACTLINE_QUEUE_GROUPS is ${JSON.stringify(rawGroups)}: a whole number from 1 to ${Policies.maxQueueGroups} (the Worker refuses anything else)`)
  }
  problems.push(...databaseProblems(effective))
  const bucket = (effective.r2_buckets ?? []).find((b) => b.binding === Policies.bindings.payloads)
  if (!bucket?.bucket_name) problems.push(`r2_buckets: missing the binding ${Policies.bindings.payloads} with a bucket_name`)
  const ledger = (effective.durable_objects?.bindings ?? []).find((b) => b.name === Policies.bindings.ledger.binding)
  if (ledger?.class_name !== Policies.bindings.ledger.className) {
    problems.push(`durable_objects.bindings: missing { name: "${Policies.bindings.ledger.binding}", class_name: "${Policies.bindings.ledger.className}" }`)
  }
  const limiter = (effective.durable_objects?.bindings ?? []).find((b) => b.name === Policies.bindings.limiter.binding)
  if (limiter?.class_name !== Policies.bindings.limiter.className) {
    problems.push(`durable_objects.bindings: missing { name: "${Policies.bindings.limiter.binding}", class_name: "${Policies.bindings.limiter.className}" } (webhook endpoints' rate limits)`)
  }
  const sqliteClasses = (effective.migrations ?? []).flatMap((m) => m.new_sqlite_classes ?? [])
  if (!sqliteClasses.includes(Policies.bindings.ledger.className)) problems.push(`migrations: ${Policies.bindings.ledger.className} must be created with new_sqlite_classes (the ledger is SQLite-backed)`)
  if (!sqliteClasses.includes(Policies.bindings.limiter.className)) problems.push(`migrations: ${Policies.bindings.limiter.className} must be created with new_sqlite_classes (add { "tag": "v2", "new_sqlite_classes": ["${Policies.bindings.limiter.className}"] })`)
  for (const cron of Policies.bindings.crons) {
    if (!(effective.triggers?.crons ?? []).includes(cron)) problems.push(`triggers.crons: missing "${cron}" (relay sweep and retention)`)
  }
  problems.push(...rateLimitProblems(effective))
  problems.push(...Policies.workflowProblems(effective.workflows, workflows))
  if (deployed) {
    for (const name of Policies.localOnlyVars) {
      if (effective.vars?.[name] !== undefined) problems.push(`vars.${name} is set: local development only, never in a deployed environment`)
    }
    for (const name of Policies.requiredSecrets) {
      if (effective.vars?.[name] !== undefined) problems.push(`vars.${name} is a plain var: it must be a secret (wrangler secret put ${name})`)
    }
  }
  return problems
}

/** A read database's index from its binding (`FACTLINE_READ_DB_3` → 3); undefined for any other binding. */
export const readDatabaseIndex = (binding: string | undefined): number | undefined => {
  const m = new RegExp(`^${Policies.bindings.readDatabasePrefix}(0|[1-9][0-9]*)$`).exec(binding ?? "")
  return m ? Number(m[1]) : undefined
}

/** The binding of read database `index`. */
export const readDatabaseBinding = (index: number): string => `${Policies.bindings.readDatabasePrefix}${index}`

/**
 * The platform's D1 databases of a config, DB first, then the read databases by index; `readDatabases` is
 * how many read databases the Worker sees (read database 0 is DB itself when `FACTLINE_READ_DB_0` is not bound).
 */
export const databasesOf = (effective: Config) => {
  const entries = effective.d1_databases ?? []
  const platform = entries.find((d) => d.binding === Policies.bindings.database)
  const reads = entries
    .filter((d) => readDatabaseIndex(d.binding) !== undefined)
    .flatMap((d) => { const index = readDatabaseIndex(d.binding); return index === undefined ? [] : [{ index, entry: d }] })
    .sort((a, b) => a.index - b.index)
  const highest = reads.length === 0 ? 0 : reads[reads.length - 1]!.index
  return { platform, reads, readDatabases: highest + 1, platformIsReadDatabase0: !reads.some((r) => r.index === 0) }
}

/**
 * What is wrong with the D1 databases: DB with a name and migrations, read databases numbered from 0 without
 * gaps (as Services.ts reads them: a gap fails every request), each with DB's migrations_dir (every database
 * gets every migration) and its own database (distinct names), and FACTLINE_READ_DBS_OPEN naming bound ones.
 */
const databaseProblems = (effective: Config): Array<string> => {
  const problems: Array<string> = []
  const { platform, reads, readDatabases } = databasesOf(effective)
  if (!platform) return [`d1_databases: missing the binding ${Policies.bindings.database}`]
  if (!platform.database_name) problems.push(`d1_databases[${platform.binding}]: missing database_name`)
  if (!platform.migrations_dir) problems.push(`d1_databases[${platform.binding}]: missing migrations_dir`)
  for (const d of effective.d1_databases ?? []) {
    if (d.binding?.startsWith(Policies.bindings.readDatabasePrefix) && readDatabaseIndex(d.binding) === undefined) {
      problems.push(`d1_databases[${d.binding}]: the Worker reads no such binding: read databases are ${readDatabaseBinding(0)}, ${readDatabaseBinding(1)}, … (no leading zeros)`)
    }
  }
  const seen = new Set<number>()
  for (const { index, entry } of reads) {
    if (seen.has(index)) problems.push(`d1_databases: ${entry.binding} is bound twice`)
    seen.add(index)
    if (index >= Policies.bindings.maxReadDatabases) problems.push(`d1_databases[${entry.binding}]: the Worker reads at most ${Policies.bindings.maxReadDatabases} read databases (${readDatabaseBinding(0)} … ${readDatabaseBinding(Policies.bindings.maxReadDatabases - 1)})`)
    if (!entry.database_name) problems.push(`d1_databases[${entry.binding}]: missing database_name`)
    if (entry.migrations_dir !== platform.migrations_dir) {
      problems.push(`d1_databases[${entry.binding}].migrations_dir is ${JSON.stringify(entry.migrations_dir)}, ${platform.binding}'s is ${JSON.stringify(platform.migrations_dir)}: every database gets the same migrations`)
    }
  }
  const missing = Array.from({ length: readDatabases }, (_, i) => i).filter((i) => i > 0 && !seen.has(i))
  if (missing.length > 0) {
    problems.push(`d1_databases: ${missing.map(readDatabaseBinding).join(", ")} ${missing.length > 1 ? "are" : "is"} missing but ${readDatabaseBinding(readDatabases - 1)} is bound: number the read databases from 0 without gaps (read database 0 is ${Policies.bindings.database} when ${readDatabaseBinding(0)} is not bound); the Worker refuses every request with a gap`)
  }
  const byName = new Map<string, Array<string>>()
  for (const entry of [platform, ...reads.map((r) => r.entry)]) {
    if (!entry.database_name) continue
    byName.set(entry.database_name, [...(byName.get(entry.database_name) ?? []), entry.binding])
  }
  for (const [name, bindings] of byName) {
    if (bindings.length > 1) problems.push(`d1_databases: database_name ${JSON.stringify(name)} is bound as ${bindings.join(" and ")}: each read database is a database of its own (read database 0 is ${Policies.bindings.database} by leaving ${readDatabaseBinding(0)} unbound)`)
  }
  const open = effective.vars?.FACTLINE_READ_DBS_OPEN
  if (typeof open === "string" && open.trim() !== "") {
    const indexes = open.split(",").map((part) => Number(part.trim()))
    const beyond = indexes.filter((n) => !Number.isInteger(n) || n < 0 || n >= readDatabases)
    if (beyond.length > 0) problems.push(`vars.FACTLINE_READ_DBS_OPEN is ${JSON.stringify(open)}: only read databases 0…${readDatabases - 1} are bound`)
  }
  const retention = effective.vars?.[Policies.payloads.retentionVar]
  if (retention !== undefined && parseRetentionDays(retention) === undefined) {
    problems.push(`vars.${Policies.payloads.retentionVar} is ${JSON.stringify(retention)}: a whole number of days, at least 1`)
  }
  return problems
}

/** A payload retention in days (a whole number ≥ 1), or undefined when it is not one. */
export const parseRetentionDays = (raw: unknown): number | undefined => {
  const n = typeof raw === "number" ? raw : /^\s*[0-9]+\s*$/.test(String(raw)) ? Number(raw) : NaN
  return Number.isInteger(n) && n >= 1 ? n : undefined
}

/** The Rate Limiting binding of a tier, as the HTTP edge reads it (packages/workers/src/http/RateLimit.ts `bindingOf`). */
const rateLimitBinding = (tier: string) => (tier === "default" ? "FACTLINE_RATE_LIMIT" : `FACTLINE_RATE_LIMIT_${tier.toUpperCase()}`)

/**
 * The per-tenant rate limits (optional: without FACTLINE_RATE_LIMIT nothing is limited): every factline tier
 * counts per 10 s, the Retry-After the edge answers, and every tier FACTLINE_RATE_LIMIT_TIERS names is bound.
 */
const rateLimitProblems = (effective: Config): Array<string> => {
  const problems: Array<string> = []
  const limits = effective.ratelimits ?? []
  for (const r of limits.filter((r) => String(r.name).startsWith("FACTLINE_RATE_LIMIT"))) {
    if (r.simple?.period !== 10) problems.push(`ratelimits[${r.name}].simple.period is ${JSON.stringify(r.simple?.period)}: factline's rate limits count per 10 s (the Retry-After its 429 answers)`)
  }
  const tiers = effective.vars?.FACTLINE_RATE_LIMIT_TIERS
  if (tiers !== undefined) {
    let parsed: unknown
    try {
      parsed = typeof tiers === "string" ? JSON.parse(tiers) : tiers
    } catch {
      return [...problems, "vars.FACTLINE_RATE_LIMIT_TIERS is not JSON (a JSON object of tenant id or \"*\" → tier)"]
    }
    for (const tier of new Set(Object.values(typeof parsed === "object" && parsed !== null ? parsed : {}))) {
      if (tier === "unlimited") continue
      const binding = rateLimitBinding(String(tier))
      if (!limits.some((r) => r.name === binding)) problems.push(`ratelimits: missing ${binding} (tier ${JSON.stringify(tier)} of vars.FACTLINE_RATE_LIMIT_TIERS)`)
    }
  }
  return problems
}

/** The D1 databases, R2 bucket and resources of one environment (what deploy creates when missing). */
export const resources = (effective: Config) => {
  const { platform, reads, readDatabases, platformIsReadDatabase0 } = databasesOf(effective)
  const bucket = (effective.r2_buckets ?? []).find((b) => b.binding === Policies.bindings.payloads)
  const database = (entry: Database) => ({ binding: entry.binding, name: entry.database_name, id: entry.database_id, migrationsDir: entry.migrations_dir })
  return {
    worker: effective.name,
    accountId: effective.account_id,
    queues: queueNames(effective),
    /** DB first, then each read database by index. */
    databases: [...(platform ? [{ ...database(platform), role: "platform" as const }] : []), ...reads.map(({ index, entry }) => ({ ...database(entry), role: "read" as const, index }))],
    readDatabases,
    platformIsReadDatabase0,
    bucket: bucket?.bucket_name,
    durableObjects: (effective.durable_objects?.bindings ?? []).map((b) => b.class_name),
    crons: effective.triggers?.crons ?? []
  }
}

/**
 * The entries `--read-databases n` adds so that the Worker sees n read databases: `FACTLINE_READ_DB_<i>` for
 * each missing i < n, named `<DB's database_name>-read-<i>`, with DB's migrations_dir and a placeholder id (the
 * deploy creates each and writes its id). It never binds `FACTLINE_READ_DB_0` where DB is read database 0 (its
 * tenants' rows are in DB), and refuses fewer than are bound: removing one would strand its tenants.
 */
export const readDatabasesToAdd = (effective: Config, n: number): Array<Database> => {
  const { platform, reads, readDatabases, platformIsReadDatabase0 } = databasesOf(effective)
  if (!Number.isInteger(n) || n < 1 || n > Policies.bindings.maxReadDatabases) throw new Error(`--read-databases must be a whole number from 1 to ${Policies.bindings.maxReadDatabases}`)
  if (n < readDatabases) throw new Error(`--read-databases ${n}: ${readDatabases} are bound already; a read database cannot be removed by deploy (its tenants' rows are there: move them first)`)
  if (!platform) throw new Error(`d1_databases: missing the binding ${Policies.bindings.database}`)
  const bound = new Set(reads.map((r) => r.index))
  return Array.from({ length: n }, (_, i) => i)
    .filter((i) => !bound.has(i) && !(i === 0 && platformIsReadDatabase0))
    .map((i) => ({ binding: readDatabaseBinding(i), database_name: `${platform.database_name}-read-${i}`, database_id: unprovisionedDatabaseId, migrations_dir: platform.migrations_dir }))
}

/** Finds the end (index after `}`) of the JSON object containing `at`, skipping strings. */
const objectBounds = (text: string, at: number) => {
  let start = at
  while (start >= 0 && text[start] !== "{") start--
  let end = at
  while (end < text.length && text[end] !== "}") {
    if (text[end] === '"') {
      end++
      while (end < text.length && text[end] !== '"') end += text[end] === "\\" ? 2 : 1
    }
    end++
  }
  return { start, end: end + 1 }
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/**
 * `text` (wrangler.jsonc) with `entries` added to the d1_databases of `env` (undefined: the top level), one
 * line each after the section's last platform database — comments and layout kept. Throws when that entry
 * cannot be found once in the text (then add them by hand); the result is parsed back and checked.
 */
export const addDatabases = (text: string, env: string | undefined, entries: ReadonlyArray<Database>): string => {
  if (entries.length === 0) return text
  const effective = forEnv(parseJsonc(text), env)
  const { platform, reads } = databasesOf(effective)
  const last = reads.length > 0 ? reads[reads.length - 1]!.entry : platform
  if (!last) throw new Error(`d1_databases: missing the binding ${Policies.bindings.database}`)
  const pattern = new RegExp(`"database_name"\\s*:\\s*"${escapeRegExp(String(last.database_name))}"`, "g")
  const found = [...text.matchAll(pattern)]
  if (found.length !== 1) throw new Error(`could not find where to add the read databases (database_name "${last.database_name}" appears ${found.length} times)`)
  const { start, end } = objectBounds(text, found[0]!.index)
  const lineStart = text.lastIndexOf("\n", start) + 1
  const indent = /^[ \t]*/.exec(text.slice(lineStart))?.[0] ?? ""
  const lines = entries.map((e) => `,\n${indent}${(renderValue([e], indent).split("\n")[1] ?? "").trim()}`).join("")
  const updated = text.slice(0, end) + lines + text.slice(end)
  const after = databasesOf(forEnv(parseJsonc(updated), env))
  for (const e of entries) {
    if (!after.reads.some((r) => r.entry.binding === e.binding && r.entry.database_name === e.database_name)) throw new Error(`could not add ${e.binding} to the config`)
  }
  return updated
}

/**
 * `text` with the `database_id` of the entry named `name` set to `id` (in the section where `database_name`
 * comes right before `database_id`, as wrangler and factline init write them); undefined when not found.
 */
export const setDatabaseId = (text: string, name: string, id: string): string | undefined => {
  const pattern = new RegExp(`("database_name"\\s*:\\s*"${escapeRegExp(name)}"\\s*,\\s*"database_id"\\s*:\\s*")[^"]*(")`)
  return pattern.test(text) ? text.replace(pattern, `$1${id}$2`) : undefined
}
