/**
 * wrangler.jsonc as text: its shape as the platform reads it (`Config`), reading it (JSONC: comments and trailing
 * commas) and writing it (`render`, wrangler's one-entry-per-line style; `platformBindings`, the platform's bindings
 * generated from `Policies.ts`). WranglerConfig.ts checks and edits a config and re-exports these.
 */
import * as Policies from "./Policies.js"

/** A D1 binding as wrangler.jsonc writes it. */
export interface Database {
  readonly binding: string
  readonly database_name?: string
  readonly database_id?: string
  readonly migrations_dir?: string
}

/** A queue consumer's settings. */
export interface Consumer {
  readonly queue: string
  readonly [setting: string]: unknown
}

/** The parts of a wrangler config (one environment's, or the top level) the platform reads; anything else kept as is. */
export interface Config {
  readonly name?: string
  readonly account_id?: string
  readonly env?: Readonly<Record<string, Config>> | undefined
  readonly vars?: Readonly<Record<string, unknown>>
  readonly queues?: { readonly producers?: ReadonlyArray<{ readonly queue: string; readonly binding: string }>; readonly consumers?: ReadonlyArray<Consumer> }
  readonly d1_databases?: ReadonlyArray<Database>
  readonly r2_buckets?: ReadonlyArray<{ readonly binding: string; readonly bucket_name?: string }>
  readonly durable_objects?: { readonly bindings?: ReadonlyArray<{ readonly name: string; readonly class_name: string }> }
  readonly migrations?: ReadonlyArray<{ readonly tag?: string; readonly new_sqlite_classes?: ReadonlyArray<string> }>
  readonly workflows?: ReadonlyArray<{ readonly name?: string; readonly binding?: string; readonly class_name?: string }>
  readonly triggers?: { readonly crons?: ReadonlyArray<string> }
  readonly ratelimits?: ReadonlyArray<{ readonly name: string; readonly simple?: { readonly period?: unknown } }>
  readonly [key: string]: unknown
}

/** Parses JSON with comments and trailing commas (what wrangler accepts in wrangler.jsonc). */
export const parseJsonc = (text: string): Config => {
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

/** Placeholder for a D1 database id not created yet; deploy replaces it with the real id. */
export const unprovisionedDatabaseId = "00000000-0000-4000-8000-000000000000"

/** The platform's bindings for one environment (generated from Policies, never written by hand). */
export const platformBindings = ({ databaseName, databaseId = unprovisionedDatabaseId, bucketName, migrationsDir = "migrations", queueGroups = Policies.defaultQueueGroups }: {
  readonly databaseName: string
  readonly databaseId?: string
  readonly bucketName: string
  readonly migrationsDir?: string
  readonly queueGroups?: number
}) => ({
  durable_objects: { bindings: [Policies.bindings.ledger, Policies.bindings.limiter].map((o) => ({ name: o.binding, class_name: o.className })) },
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
export const render = (config: object, comments: Readonly<Record<string, string>> = {}, indent = ""): string => {
  const inner = indent + "  "
  const lines = Object.entries(config).map(([key, value]) => {
    const note = comments[key]
    const comment = note ? note.split("\n").map((l) => `${inner}// ${l}\n`).join("") : ""
    return `${comment}${inner}${JSON.stringify(key)}: ${renderValue(value, inner)}`
  })
  return `{\n${lines.join(",\n")}\n${indent}}`
}

/** One value as `render` writes it: an array of objects one entry per line, an object as `render`, else JSON. */
export const renderValue = (value: unknown, indent: string): string => {
  if (Array.isArray(value) && value.some((v) => typeof v === "object" && v !== null)) {
    return `[\n${value.map((v) => `${indent}  ${JSON.stringify(v).replace(/([,:])(?=["{[\d])/g, "$1 ").replace(/^\{/, "{ ").replace(/\}$/, " }")}`).join(",\n")}\n${indent}]`
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value)) return render(value, {}, indent)
  return JSON.stringify(value)
}
