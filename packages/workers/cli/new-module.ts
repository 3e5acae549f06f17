/**
 * `factline new:module <name> [--app DIR] [--no-migration] [--workflow]`: scaffolds a module into a factline app — an event
 * type with v1, its handler, a processor, a projection with its Drizzle table, specs with the test kit and a
 * property spec (every handler and processor fed inputs drawn from their schemas: PropertySpec) —,
 * registers it in the app's src/modules.ts (and its table in src/schema.ts where that lists each module's), generates its D1 migration (`factline db:generate --name <name>`,
 * never interactive) and writes its types' schema snapshots (the app's `snapshots:write`). Its specs pass unchanged (`npm run test:specs`), and the app's registry spec
 * (test/registry.spec.ts) covers it. Refuses to overwrite anything.
 *
 * `--workflow` adds a workflow to the module (a flag, not a commented example: code a new team keeps is code
 * that typechecks and whose spec runs from the first minute): `follow-up-<name>`, started by a qualified
 * `<name>_qualified`, calls a module service (`<Name>Notifier`, src/<name>/Notifier.ts, a stand-in that logs)
 * with its step's idempotency key, sleeps `<NAME>_FOLLOW_UP_AFTER` (default 1 day) and appends
 * `<name>_followed_up`; its specs (WorkflowSpec, with a fake notifier) go into the module's spec file. An app
 * whose wrangler config has no Workflows binding is told what to add.
 *
 * The app is the current directory (`npx factline new:module leads` in an app made by `factline init`) or
 * `--app DIR` (this repository's `npm run new:module -- leads` passes `--app apps/example`).
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import * as Args from "./Args.js"
import * as Generate from "./generate.js"
import { type Io, stdio } from "./Io.js"
import { propertySpecSource, specSource } from "./new-module-specs.js"
import { notifierSource, workflowSource } from "./new-module-workflow.js"

export const usage = `usage: factline new:module <name> [--app DIR] [--no-migration] [--workflow]

  <name>           lower-case letters and digits joined by '_', starting with a letter (e.g. leads, lead_scores)
  --app DIR        the app (default: the current directory): src/modules.ts, src/<name>/, test/
  --no-migration   do not run db:generate
  --workflow       also a workflow (Cloudflare Workflows) started by the module's qualified fact: a service call
                   with its step's idempotency key, a durable sleep, a fact appended — with its specs`

export const namePattern = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/

export const run = async (argv: ReadonlyArray<string>, io: Io = stdio): Promise<number> => {
  let parsed
  try {
    parsed = Args.parse(argv, { values: ["app"], switches: ["no-migration", "workflow"] })
  } catch (error) {
    if (!(error instanceof Args.ArgsError)) throw error
    io.err(`new:module: ${error.message}\n${usage}\n`)
    return 2
  }
  const { options, positional } = parsed
  if (options.help) {
    io.out(`${usage}\n`)
    return 0
  }
  const fail = (message: string) => {
    io.err(`new:module: ${message}\n`)
    return 1
  }
  const [name] = positional
  if (!name || positional.length > 1) {
    io.err(`${usage}\n`)
    return 2
  }
  if (!namePattern.test(name) || name.length > 40) {
    return fail(`module name ${JSON.stringify(name)} is not valid: use lower-case letters and digits joined by '_', starting with a letter, at most 40 characters (e.g. leads, lead_scores)`)
  }
  const app = resolve(options.app ?? ".")
  const shown = (path: string) => relative(process.cwd(), path)
  const modulesPath = join(app, "src", "modules.ts")
  if (!existsSync(modulesPath)) return fail(`${shown(modulesPath)} not found: run it in a factline app (or pass --app DIR)`)
  const pascal = name.split("_").map((w) => w.slice(0, 1).toUpperCase() + w.slice(1)).join("")
  const camel = pascal.slice(0, 1).toLowerCase() + pascal.slice(1)
  const dir = join(app, "src", name)
  const workflow = options.workflow === true
  const files = {
    [join(dir, `${pascal}.ts`)]: moduleSource(name, pascal, camel, workflow),
    [join(dir, "Tables.ts")]: tablesSource(name, camel),
    ...(workflow ? { [join(dir, "Notifier.ts")]: notifierSource(name, pascal) } : {}),
    [join(app, "test", `${name}.spec.ts`)]: specSource(name, pascal, camel, workflow),
    [join(app, "test", `${name}.properties.spec.ts`)]: propertySpecSource(name, pascal, camel)
  }
  for (const path of Object.keys(files)) if (existsSync(path)) return fail(`${shown(path)} already exists; nothing was written`)
  const modules = readFileSync(modulesPath, "utf8")
  const list = modules.match(/export const modules = \[([^\]]*)\] as const/)
  if (!list) return fail(`${shown(modulesPath)} has no \`export const modules = [ ... ] as const\` list to register the module in`)
  if ((list[1] ?? "").split(",").map((s) => s.trim()).includes(camel)) return fail(`module ${camel} is already registered in ${shown(modulesPath)}`)

  mkdirSync(dir, { recursive: true })
  mkdirSync(join(app, "test"), { recursive: true })
  for (const [path, source] of Object.entries(files)) writeFileSync(path, source)
  const entries = [...(list[1] ?? "").split(",").map((s) => s.trim()).filter(Boolean), camel]
  const lastImport = [...modules.matchAll(/^import .*$/gm)].at(-1)
  const importLine = `import { ${camel} } from "./${name}/${pascal}.js"`
  let updated = modules.replace(list[0], `export const modules = [${entries.join(", ")}] as const`)
  updated = lastImport ? updated.replace(lastImport[0], `${lastImport[0]}\n${importLine}`) : `${importLine}\n${updated}`
  writeFileSync(modulesPath, updated)
  // An app whose Drizzle schema lists each module's tables (`export * from "./orders/Tables.js"`, as
  // `factline init` writes it) gets the new one's line; a schema built from the modules list needs none.
  const schemaPath = join(app, "src", "schema.ts")
  const schema = existsSync(schemaPath) ? readFileSync(schemaPath, "utf8") : ""
  const tableExports = [...schema.matchAll(/^export \* from "\.\/[^"]+\/Tables\.js"$/gm)]
  for (const path of Object.keys(files)) io.out(`created ${shown(path)}\n`)
  io.out(`registered ${camel} in ${shown(modulesPath)}\n`)
  if (tableExports.length > 0) {
    const last = tableExports.at(-1)![0]
    writeFileSync(schemaPath, schema.replace(last, `${last}\nexport * from "./${name}/Tables.js"`))
    io.out(`added its table to ${shown(schemaPath)}\n`)
  }

  if (!options["no-migration"]) {
    const generated = Generate.generate({ cwd: app, name })
    if (generated.status !== 0) return fail(`the module is written, but db:generate failed (run it again: npm run db:generate -- --name ${name}):\n${generated.output}`)
    io.out(generated.migration ? `generated ${relative(process.cwd(), join(app, generated.migration))}\n` : `${generated.output.trim().split("\n").at(-1)}\n`)
  }
  // Its message and fact types are new: their version-1 JSON Schemas are written now, so the app's schema
  // snapshot spec (test/schemas.spec.ts) holds them from the start (an app without the script is left as it is).
  const scripts = existsSync(join(app, "package.json")) ? JSON.parse(readFileSync(join(app, "package.json"), "utf8")).scripts ?? {} : {}
  if (typeof scripts["snapshots:write"] === "string") {
    const written = spawnSync("npm", ["run", "-s", "snapshots:write"], { cwd: app, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } })
    if (written.status !== 0) return fail(`the module is written, but its schema snapshots were not (run npm run snapshots:write):\n${written.stdout}${written.stderr}`)
    io.out(`wrote its schema snapshots to ${shown(join(dir, "schemas"))}/\n`)
  }
  // The workflow runs on the app's Workflows binding (the class FactlineWorkflow, exported by its entry).
  const wrangler = ["wrangler.jsonc", "wrangler.json", "wrangler.toml"].map((f) => join(app, f)).find((f) => existsSync(f))
  const missingBinding = workflow && (wrangler === undefined || !readFileSync(wrangler, "utf8").includes("FactlineWorkflow"))
  io.out(`
next:${missingBinding ? `
  add the Workflows binding to ${wrangler === undefined ? "your wrangler config" : shown(wrangler)} (top level and each env):
    "workflows": [{ "name": "factline-workflows", "binding": "FACTLINE_WORKFLOWS", "class_name": "FactlineWorkflow" }]
  and export its class from your Worker's entry: export { FactlineWorkflow } from "@factline/workers"` : ""}
  edit ${shown(join(dir, `${pascal}.ts`))} (payload schema, facts, handler, processor, projection${workflow ? ", workflow" : ""})
  npm run test:specs                           # the specs, in Node, in about a second
  npm run dev                                  # then POST a ${name}.received event and query /v1/projections/${name}
`)
  return 0
}

function moduleSource(name: string, pascal: string, camel: string, workflow: boolean) {
  const kebab = name.replace(/_/g, "-")
  return `/**
 * The ${name} module: \`${name}.received\` (v1) recorded as a \`${name}_received\` fact by a handler,
 * qualified by a processor (\`${name}_qualified\`), and projected into the \`${name}\` table.${workflow ? `
 * A qualified ${name} is followed up by a workflow (\`follow-up-${kebab}\`).` : ""}
 * Subject = the ${name} id. Scaffolded by \`factline new:module ${name}${workflow ? " --workflow" : ""}\`; make it yours.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
${workflow ? `import * as Activity from "effect/workflow/Activity"
import * as DurableClock from "effect/workflow/DurableClock"
import { FactDefinition, Handler, MessageDefinition, Module, PermanentError, Processor, Projection, Workflow } from "@factline/core"
import { ${pascal}Notifier } from "./Notifier.js"` : `import { FactDefinition, Handler, MessageDefinition, Module, PermanentError, Processor, Projection } from "@factline/core"`}
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

${workflow ? workflowSource(name, pascal, kebab) : ""}export const ${camel} = Module.make("${name}", {
  tables: Tables,
  handlers: [record${pascal}],
  processors: [qualify${pascal}],
  projections: [${camel}Projection]${workflow ? `,
  workflows: [followUp${pascal}],
  // The services its code requires: the workflow's notifier (a test layer in its specs).
  layer: ${pascal}Notifier.layer` : `
  // layer: the services its handlers and processors require (docs/product-teams.md#handlers-with-services)`}
})
`
}

function tablesSource(name: string, camel: string) {
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
