/**
 * wrangler.jsonc as the platform sees it: parsed (JSONC), narrowed to one wrangler environment, checked
 * against the platform's queues and bindings (`Policies.mjs`), and generated for a new app. It reads and
 * writes files only; talking to Cloudflare is `deploy.mjs`'s job.
 */
import * as Policies from "./Policies.mjs"

/** Parses JSON with comments and trailing commas (what wrangler accepts in wrangler.jsonc). */
export const parseJsonc = (text) => {
  let out = ""
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (c === '"') {
      let j = i + 1
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1
      out += text.slice(i, j + 1)
      i = j
    } else if (c === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i++
      out += "\n"
    } else if (c === "/" && text[i + 1] === "*") {
      i = text.indexOf("*/", i + 2)
      if (i === -1) throw new Error("unterminated /* comment")
      i++
    } else out += c
  }
  return JSON.parse(out.replace(/,(\s*[}\]])/g, "$1"))
}

/** Keys wrangler does not inherit from the top level into an environment (bindings, vars). */
const notInherited = ["vars", "durable_objects", "d1_databases", "r2_buckets", "queues", "kv_namespaces", "services", "analytics_engine_datasets", "ratelimits"]

/**
 * The configuration wrangler deploys for `env` (undefined: the top level): inherited keys fall back to the
 * top level, bindings come only from the environment's own section, the name gets wrangler's `-<env>` suffix.
 */
export const forEnv = (config, env) => {
  if (env === undefined) return { ...config, env: undefined }
  const section = config.env?.[env]
  if (section === undefined) throw new Error(`wrangler config has no env.${env} section (declared: ${Object.keys(config.env ?? {}).join(", ") || "none"})`)
  const inherited = Object.fromEntries(Object.entries(config).filter(([k]) => k !== "env" && !notInherited.includes(k)))
  return { ...inherited, name: `${config.name}-${env}`, ...section, env: undefined }
}

/** Every queue the configuration produces to or consumes from, in a stable order. */
export const queueNames = (effective) => {
  const names = [...(effective.queues?.producers ?? []).map((p) => p.queue), ...(effective.queues?.consumers ?? []).map((c) => c.queue)]
  return [...new Set(names)]
}

/**
 * What is missing or wrong for the platform to run with this (environment's) configuration: every
 * platform queue and DLQ produced to and consumed with the policy's settings, D1, R2, the ledger Durable
 * Object with its SQLite migration, the cron, and no local-only setting. An empty list means it passes.
 */
export const check = (effective, { deployed = false } = {}) => {
  const problems = []
  const producers = effective.queues?.producers ?? []
  const consumers = effective.queues?.consumers ?? []
  const hasProducer = (queue, binding) => producers.some((p) => p.queue === queue && p.binding === binding)
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
    if (!consumers.some((c) => c.queue === q.deadLetterQueue)) problems.push(`queues.consumers: missing the consumer of ${q.deadLetterQueue} (dead letters are stored from it)`)
  }
  const db = (effective.d1_databases ?? []).find((d) => d.binding === Policies.bindings.database)
  if (!db) problems.push(`d1_databases: missing the binding ${Policies.bindings.database}`)
  else {
    if (!db.database_name) problems.push(`d1_databases[${db.binding}]: missing database_name`)
    if (!db.migrations_dir) problems.push(`d1_databases[${db.binding}]: missing migrations_dir`)
  }
  const bucket = (effective.r2_buckets ?? []).find((b) => b.binding === Policies.bindings.payloads)
  if (!bucket?.bucket_name) problems.push(`r2_buckets: missing the binding ${Policies.bindings.payloads} with a bucket_name`)
  const ledger = (effective.durable_objects?.bindings ?? []).find((b) => b.name === Policies.bindings.ledger.binding)
  if (ledger?.class_name !== Policies.bindings.ledger.className) {
    problems.push(`durable_objects.bindings: missing { name: "${Policies.bindings.ledger.binding}", class_name: "${Policies.bindings.ledger.className}" }`)
  }
  const sqliteClasses = (effective.migrations ?? []).flatMap((m) => m.new_sqlite_classes ?? [])
  if (!sqliteClasses.includes(Policies.bindings.ledger.className)) problems.push(`migrations: ${Policies.bindings.ledger.className} must be created with new_sqlite_classes (the ledger is SQLite-backed)`)
  for (const cron of Policies.bindings.crons) {
    if (!(effective.triggers?.crons ?? []).includes(cron)) problems.push(`triggers.crons: missing "${cron}" (relay sweep and retention)`)
  }
  problems.push(...rateLimitProblems(effective))
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

/** The Rate Limiting binding of a tier, as the HTTP edge reads it (packages/workers/src/http/RateLimit.ts `bindingOf`). */
const rateLimitBinding = (tier) => (tier === "default" ? "FACTLINE_RATE_LIMIT" : `FACTLINE_RATE_LIMIT_${tier.toUpperCase()}`)

/**
 * The per-tenant rate limits (optional: without FACTLINE_RATE_LIMIT nothing is limited): every factline tier
 * counts per 10 s, the Retry-After the edge answers, and every tier FACTLINE_RATE_LIMIT_TIERS names is bound.
 */
const rateLimitProblems = (effective) => {
  const problems = []
  const limits = effective.ratelimits ?? []
  for (const r of limits.filter((r) => String(r.name).startsWith("FACTLINE_RATE_LIMIT"))) {
    if (r.simple?.period !== 10) problems.push(`ratelimits[${r.name}].simple.period is ${JSON.stringify(r.simple?.period)}: factline's rate limits count per 10 s (the Retry-After its 429 answers)`)
  }
  const tiers = effective.vars?.FACTLINE_RATE_LIMIT_TIERS
  if (tiers !== undefined) {
    let parsed
    try {
      parsed = typeof tiers === "string" ? JSON.parse(tiers) : tiers
    } catch {
      return [...problems, "vars.FACTLINE_RATE_LIMIT_TIERS is not JSON (a JSON object of tenant id or \"*\" → tier)"]
    }
    for (const tier of new Set(Object.values(parsed ?? {}))) {
      if (tier === "unlimited") continue
      const binding = rateLimitBinding(String(tier))
      if (!limits.some((r) => r.name === binding)) problems.push(`ratelimits: missing ${binding} (tier ${JSON.stringify(tier)} of vars.FACTLINE_RATE_LIMIT_TIERS)`)
    }
  }
  return problems
}

/** The D1 database, R2 bucket and resources of one environment (what deploy creates when missing). */
export const resources = (effective) => {
  const db = (effective.d1_databases ?? []).find((d) => d.binding === Policies.bindings.database)
  const bucket = (effective.r2_buckets ?? []).find((b) => b.binding === Policies.bindings.payloads)
  return {
    worker: effective.name,
    accountId: effective.account_id,
    queues: queueNames(effective),
    database: db && { name: db.database_name, id: db.database_id, migrationsDir: db.migrations_dir },
    bucket: bucket?.bucket_name,
    durableObjects: (effective.durable_objects?.bindings ?? []).map((b) => b.class_name),
    crons: effective.triggers?.crons ?? []
  }
}

/** Placeholder for a D1 database id not created yet; deploy replaces it with the real id. */
export const unprovisionedDatabaseId = "00000000-0000-4000-8000-000000000000"

/** The platform's bindings for one environment (generated from Policies, never written by hand). */
export const platformBindings = ({ databaseName, databaseId = unprovisionedDatabaseId, bucketName, migrationsDir = "migrations", queueGroups = Policies.defaultQueueGroups }) => ({
  durable_objects: { bindings: [{ name: Policies.bindings.ledger.binding, class_name: Policies.bindings.ledger.className }] },
  d1_databases: [{ binding: Policies.bindings.database, database_name: databaseName, database_id: databaseId, migrations_dir: migrationsDir }],
  r2_buckets: [{ binding: Policies.bindings.payloads, bucket_name: bucketName }],
  queues: {
    producers: Policies.queues.flatMap((q) => [...Policies.physicalQueues(q, queueGroups), { queue: q.deadLetterQueue, binding: q.deadLetterBinding }]),
    consumers: [
      ...Policies.queues.flatMap((q) => Policies.physicalQueues(q, queueGroups).map(({ queue }) => ({ queue, max_batch_size: q.maxBatchSize, max_batch_timeout: q.maxBatchTimeoutSeconds, max_retries: q.maxRetries, dead_letter_queue: q.deadLetterQueue }))),
      ...Policies.queues.map((q) => ({ queue: q.deadLetterQueue, max_batch_size: Policies.deadLetterConsumer.maxBatchSize, max_batch_timeout: Policies.deadLetterConsumer.maxBatchTimeoutSeconds, max_retries: Policies.deadLetterConsumer.maxRetries }))
    ]
  }
})

/**
 * Renders a config object as JSONC with one array entry per line (wrangler's own style for bindings),
 * and optional `// comments` before top-level keys.
 */
export const render = (config, comments = {}, indent = "") => {
  const inner = indent + "  "
  const lines = Object.entries(config).map(([key, value]) => {
    const comment = comments[key] ? comments[key].split("\n").map((l) => `${inner}// ${l}\n`).join("") : ""
    return `${comment}${inner}${JSON.stringify(key)}: ${renderValue(value, inner)}`
  })
  return `{\n${lines.join(",\n")}\n${indent}}`
}

const renderValue = (value, indent) => {
  if (Array.isArray(value) && value.some((v) => typeof v === "object" && v !== null)) {
    return `[\n${value.map((v) => `${indent}  ${JSON.stringify(v).replace(/([,:])(?=["{[\d])/g, "$1 ").replace(/^\{/, "{ ").replace(/\}$/, " }")}`).join(",\n")}\n${indent}]`
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value)) return render(value, {}, indent)
  return JSON.stringify(value)
}
