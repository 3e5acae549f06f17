#!/usr/bin/env node
// `npm run new:module -- <name>`: scaffolds a module in the example app — an event type with v1, its
// handler, a processor, a projection with its Drizzle table, and specs with the test kit — registers it in
// src/modules.ts and generates its D1 migration with drizzle-kit. Its specs pass unchanged
// (`npm run test:specs -w @factline/example`). Refuses to overwrite anything.
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const app = join(dirname(fileURLToPath(import.meta.url)), "..")
const root = join(app, "..", "..")
const args = process.argv.slice(2)
const name = args.find((a) => !a.startsWith("--"))
const migrate = !args.includes("--no-migration")

const fail = (message) => {
  console.error(`new:module: ${message}`)
  process.exit(1)
}
if (!name) fail("usage: npm run new:module -- <name>   (e.g. leads: lower-case letters, digits and '_', starting with a letter)")
if (!/^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/.test(name) || name.length > 40) {
  fail(`module name ${JSON.stringify(name)} is not valid: use lower-case letters and digits joined by '_', starting with a letter, at most 40 characters (e.g. leads, lead_scores)`)
}
const pascal = name.split("_").map((w) => w[0].toUpperCase() + w.slice(1)).join("")
const camel = pascal[0].toLowerCase() + pascal.slice(1)
const dir = join(app, "src", name)
const files = {
  [join(dir, `${pascal}.ts`)]: moduleSource(),
  [join(dir, "Tables.ts")]: tablesSource(),
  [join(app, "test", `${name}.spec.ts`)]: specSource()
}
for (const path of Object.keys(files)) if (existsSync(path)) fail(`${relative(root, path)} already exists; nothing was written`)
const modulesPath = join(app, "src", "modules.ts")
const modules = readFileSync(modulesPath, "utf8")
const list = modules.match(/export const modules = \[([^\]]*)\] as const/)
if (!list) fail("src/modules.ts has no `export const modules = [ ... ] as const` list to register the module in")
if (list[1].split(",").map((s) => s.trim()).includes(camel)) fail(`module ${camel} is already registered in src/modules.ts`)

mkdirSync(dir, { recursive: true })
for (const [path, source] of Object.entries(files)) writeFileSync(path, source)
const entries = [...list[1].split(",").map((s) => s.trim()).filter(Boolean), camel]
const lastImport = [...modules.matchAll(/^import .*$/gm)].at(-1)
const importLine = `import { ${camel} } from "./${name}/${pascal}.js"`
let updated = modules.replace(list[0], `export const modules = [${entries.join(", ")}] as const`)
updated = lastImport
  ? updated.replace(lastImport[0], `${lastImport[0]}\n${importLine}`)
  : `${importLine}\n${updated}`
writeFileSync(modulesPath, updated)
for (const path of Object.keys(files)) console.log(`created ${relative(root, path)}`)
console.log(`registered ${camel} in ${relative(root, modulesPath)}`)

if (migrate) {
  const drizzle = join(root, "node_modules", "drizzle-kit", "bin.cjs")
  const run = spawnSync(process.execPath, ["--conditions=@factline/source", drizzle, "generate", "--name", name], { cwd: root, encoding: "utf8" })
  if (run.status !== 0) fail(`drizzle-kit generate failed:\n${run.stdout}\n${run.stderr}`)
  const created = run.stdout.split("\n").find((l) => /migrations\/.*\.sql/.test(l))
  console.log(created ? `generated ${created.replace(/.*?(migrations\/\S+\.sql).*/, "$1")}` : run.stdout.trim().split("\n").at(-1))
}
console.log(`
next:
  edit src/${name}/${pascal}.ts (payload schema, facts, handler, processor, projection)
  npm run test:specs                           # the specs, in Node, in about a second
  npm run dev                                  # then POST a ${name}.received event and query /v1/projections/${name}`)

function moduleSource() {
  return `/**
 * The ${name} module: \`${name}.received\` (v1) recorded as a \`${name}_received\` fact by a handler,
 * qualified by a processor (\`${name}_qualified\`), and projected into the \`${name}\` table.
 * Subject = the ${name} id. Scaffolded by \`npm run new:module -- ${name}\`; make it yours.
 */
import { Effect, Schema } from "effect"
import { FactDefinition, Handler, MessageDefinition, Module, PermanentError, Processor, Projection } from "@factline/core"
import * as Tables from "./Tables.js"

const Id = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))

/** The event producers send: \`POST /v1/events\` with \`message_type: "${name}.received"\`. */
export const ${pascal}Received = MessageDefinition.event("${name}.received").version(
  1,
  Schema.Struct({ id: Id, score: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 100 })) })
)

/** The facts this module owns. */
export const Received = FactDefinition.make("${name}_received", Schema.Struct({ id: Id, score: Schema.Int }))
export const Qualified = FactDefinition.make("${name}_qualified", Schema.Struct({ id: Id, qualified: Schema.Boolean }))

export const record${pascal} = Handler.handler(${pascal}Received, {
  name: "record-${name.replace(/_/g, "-")}",
  emits: [Received],
  handle: (m) =>
    m.subject === m.payload.id
      ? Effect.succeed([Received.make(m.payload)])
      : Effect.fail(new PermanentError({ message: \`subject "\${m.subject}" must be the id "\${m.payload.id}"\` }))
})

/** A score of at least this qualifies. */
export const qualifyingScore = 50

export const qualify${pascal} = Processor.make(Received, {
  name: "qualify-${name.replace(/_/g, "-")}",
  emits: [Qualified],
  process: ({ data }) => Effect.succeed([Qualified.make({ id: data.id, qualified: data.score >= qualifyingScore })])
})

export const ${camel}Projection = Projection.rows({
  name: "${name}",
  table: Tables.${camel},
  key: ["id"],
  queryable: ["id", "qualified"],
  on: [
    Projection.on(Received, ({ id, score }) => ({ id, score })),
    Projection.on(Qualified, ({ id, qualified }) => ({ id, qualified }))
  ]
})

export const ${camel} = Module.make("${name}", {
  tables: Tables,
  handlers: [record${pascal}],
  processors: [qualify${pascal}],
  projections: [${camel}Projection]
  // layer: the services its handlers and processors require (docs/product-teams.md#handlers-with-services)
})
`
}

function tablesSource() {
  return `/** The ${name} module's projection table (drizzle-kit generates its migration from this file). */
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core"
import { Projection } from "@factline/core"

/** One row per ${name} id. The \`<fact type>_seq\` columns make it order-safe (see Projection). */
export const ${camel} = sqliteTable(
  "${name}",
  {
    tenant_id: text("tenant_id").notNull(),
    id: text("id").notNull(),
    score: integer("score"),
    qualified: integer("qualified", { mode: "boolean" }),
    ...Projection.sequenceColumns(["${name}_received", "${name}_qualified"])
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.id] })]
)
`
}

function specSource() {
  return `/** The ${name} module's specs, in plain Node with the test kit (\`npm run test:specs\`). */
import { describe, it } from "vitest"
import { HandlerSpec, ProcessorSpec, ProjectionSpec, fact, message } from "@factline/core/testing"
import { ${camel}Projection, ${pascal}Received, Qualified, qualify${pascal}, Received, record${pascal} } from "../src/${name}/${pascal}.js"

describe("${name}", () => {
  it("records a received ${name}", () =>
    HandlerSpec.for(record${pascal}).when(message(${pascal}Received, { id: "x1", score: 70 }, { subject: "x1" })).then([Received.make({ id: "x1", score: 70 })]))

  it("refuses a ${name} sent to another id's stream", () =>
    HandlerSpec.for(record${pascal}).when(message(${pascal}Received, { id: "x1", score: 70 }, { subject: "x2" })).thenFails("must be the id", { permanent: true }))

  it("qualifies a score of at least 50", () =>
    ProcessorSpec.for(qualify${pascal}).when(fact(Received, { id: "x1", score: 50 }, { stream: "x1" })).then([Qualified.make({ id: "x1", qualified: true })]))

  it("projects one row per id, whatever the order and duplicates", () =>
    ProjectionSpec.for(${camel}Projection)
      .given([
        fact(Received, { id: "x1", score: 70 }, { stream: "x1" }),
        fact(Qualified, { id: "x1", qualified: true }, { stream: "x1" }),
        fact(Received, { id: "x2", score: 10 }, { stream: "x2" })
      ])
      .then([
        { id: "x1", score: 70, qualified: true },
        { id: "x2", score: 10, qualified: null }
      ]))
})
`
}
