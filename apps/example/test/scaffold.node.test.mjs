/**
 * The guide's commands (docs/first-handler.md), run in a temporary copy of the repository: `npm run new:module --
 * leads` prints exactly what the guide shows (file names and the migration's real number — run with
 * FACTLINE_UPDATE_DOCS=1 to write the real output into the guide), writes the module, its table, its specs,
 * registers it in src/modules.ts and generates its migration; the copy then typechecks, the generated specs (its
 * property spec too) and the registry spec pass unchanged, and a handler edited to throw on a drawn score of 0 fails the
 * property spec naming the input and src/leads/Leads.ts:line. The guide's workflow section: `npm run new:module -- NAME --workflow` prints what the
 * guide shows and writes the module with its workflow (Notifier.ts, the WorkflowSpecs), whose specs pass too. Then a table edit: renaming a column makes `npm run db:generate` stop
 * without a prompt (exit 3, nothing written, both answers named), and `--rename` generates the RENAME.
 * (Runs in Node; spawns npm, the factline CLI, drizzle-kit, tsc and vitest.)
 */
import { spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..")
const copy = mkdtempSync(join(tmpdir(), "factline-scaffold-"))
afterAll(() => rmSync(copy, { recursive: true, force: true }))

const run = (command, args, cwd) => {
  const result = spawnSync(command, args, { cwd, encoding: "utf8", timeout: 300_000, env: { ...process.env, NO_COLOR: "1" } })
  return { status: result.status, stdout: result.stdout, output: `${result.stdout}\n${result.stderr}` }
}
const npm = (args) => run("npm", ["run", "-s", ...args], copy)

/** The guide's scaffold command and the output it shows (the fenced block after the command's). */
const guidePath = join(root, "docs", "first-handler.md")
const guideBlock = (guide, flags = "") => {
  const match = new RegExp(`\`\`\`sh\\n(npm run new:module -- (\\w+)${flags})\\n\`\`\`\\n\`\`\`\\n([\\s\\S]*?)\\n\`\`\``).exec(guide)
  if (!match) throw new Error(`docs/first-handler.md has no \`\`\`sh npm run new:module -- NAME${flags}\`\`\` block followed by its output`)
  return { whole: match[0], command: match[1], name: match[2], shown: match[3] }
}

/** Runs the guide's scaffold command (`flags`: its options) in the copy; checks (or, FACTLINE_UPDATE_DOCS=1, writes) the output the guide shows. */
const scaffoldAsGuided = (flags = "") => {
  const guide = readFileSync(guidePath, "utf8")
  const { whole, command, name, shown } = guideBlock(guide, flags)
  const scaffold = npm(command.replace(/^npm run /, "").split(" "))
  expect(scaffold.status, scaffold.output).toBe(0)
  const real = scaffold.stdout.split("\n\nnext:")[0].trim()
  if (process.env.FACTLINE_UPDATE_DOCS === "1") writeFileSync(guidePath, guide.replace(whole, `\`\`\`sh\n${command}\n\`\`\`\n\`\`\`\n${real}\n\`\`\``))
  else expect(shown, `docs/first-handler.md shows other output than \`${command}\` prints (FACTLINE_UPDATE_DOCS=1 writes the real one)`).toBe(real)
  return { name, real }
}

describe("the first-handler guide's commands", () => {
  it("npm run new:module prints what the guide shows; the module is registered, migrated, typechecks, its specs, the registry spec and the schema snapshots spec pass", () => {
    // The repository's tracked and new files (not node_modules, not build output), with node_modules linked.
    const listed = spawnSync("git", ["ls-files", "-co", "--exclude-standard"], { cwd: root, encoding: "utf8" }).stdout.split("\n").filter(Boolean)
    for (const file of listed) if (existsSync(join(root, file))) cpSync(join(root, file), join(copy, file))
    symlinkSync(join(root, "node_modules"), join(copy, "node_modules"), "dir")
    const migrationsBefore = readdirSync(join(copy, "migrations")).filter((f) => f.endsWith(".sql"))

    const { real } = scaffoldAsGuided()

    expect(readFileSync(join(copy, "apps/example/src/modules.ts"), "utf8")).toMatch(/import \{ leads \} from "\.\/leads\/Leads\.js"[\s\S]*export const modules = \[calls, [^\]]*\bleads\] as const/)
    const added = readdirSync(join(copy, "migrations")).filter((f) => f.endsWith(".sql") && !migrationsBefore.includes(f))
    expect(added).toHaveLength(1)
    expect(real).toContain(`generated migrations/${added[0]}`)
    expect(readFileSync(join(copy, "migrations", added[0]), "utf8")).toContain("CREATE TABLE `leads`")

    // Running it again refuses to overwrite; a bad name is refused.
    const again = npm(["new:module", "--", "leads"])
    expect(again.status).toBe(1)
    expect(again.output).toContain("apps/example/src/leads/Leads.ts already exists; nothing was written")
    expect(npm(["new:module", "--", "Leads"]).output).toContain('module name "Leads" is not valid')

    // The guide's workflow section: a module with its workflow, its notifier and their specs.
    const workflow = scaffoldAsGuided(" --workflow")
    const pascal = workflow.name.slice(0, 1).toUpperCase() + workflow.name.slice(1)
    expect(workflow.real).toContain(`created apps/example/src/${workflow.name}/Notifier.ts`)
    const source = readFileSync(join(copy, `apps/example/src/${workflow.name}/${pascal}.ts`), "utf8")
    expect(source).toContain(`workflows: [followUp${pascal}]`)
    expect(source).toContain(`layer: ${pascal}Notifier.layer`)
    expect(readFileSync(join(copy, "apps/example/src/modules.ts"), "utf8")).toMatch(new RegExp(`export const modules = \\[calls, [^\\]]*\\bleads, ${workflow.name}\\] as const`))

    const app = join(copy, "apps/example")
    const typecheck = run(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", "."], app)
    expect(typecheck.status, typecheck.output).toBe(0)
    const vitest = (files) => run(process.execPath, [join(root, "node_modules/vitest/vitest.mjs"), "run", "--config", "vitest.node.config.ts", ...files], app)
    const specs = vitest(["test/leads.spec.ts", "test/leads.properties.spec.ts", `test/${workflow.name}.spec.ts`, `test/${workflow.name}.properties.spec.ts`, "test/registry.spec.ts", "test/schemas.spec.ts"])
    expect(specs.status, specs.output).toBe(0)
    // leads 4 + its property spec, the workflow module's 4 + 2 workflow specs + its property spec, the registry and the schema snapshots spec.
    expect(specs.output.replace(/\x1b\[[0-9;]*m/g, "")).toMatch(/Tests\s+14 passed \(14\)/)

    // A handler that throws on some input (a division by a score that can be 0) fails the generated property spec,
    // naming the input and the line in the team's file — caught by npm test, not by a dead letter.
    const leadsSource = join(app, "src/leads/Leads.ts")
    writeFileSync(leadsSource, readFileSync(leadsSource, "utf8").replace(
      "? Effect.succeed([Received.make(m.payload)])",
      "? Effect.sync(() => [Received.make({ id: m.payload.id, score: BigInt(100) / BigInt(m.payload.score) > 0n ? m.payload.score : 0 })])"
    ))
    const thrown = vitest(["test/leads.properties.spec.ts"])
    expect(thrown.status, thrown.output).toBe(1)
    expect(thrown.output).toMatch(/handler record-leads \(module leads\), on the input \{.*score.{1,3}:0\}.*threw \(a defect, not a typed failure\): RangeError: Division by zero \(at src\/leads\/Leads\.ts:\d+:\d+\)/)
  }, 600_000)

  it("a renamed column: npm run db:generate stops without a prompt naming both answers, and --rename generates the RENAME", () => {
    const tables = join(copy, "apps/example/src/leads/Tables.ts")
    writeFileSync(tables, readFileSync(tables, "utf8").replace('score: integer("score")', 'rating: integer("rating")'))
    const before = readdirSync(join(copy, "migrations")).filter((f) => f.endsWith(".sql"))

    const asked = npm(["db:generate", "--", "--name", "leads_rating"])
    expect(asked.status, asked.output).toBe(3)
    expect(asked.output).toContain("drizzle-kit asks whether column leads.rating is new or renamed from leads.score; nothing was generated.")
    expect(asked.output).toContain("--rename leads.score:leads.rating")
    expect(asked.output).toContain("--create leads.rating")
    expect(readdirSync(join(copy, "migrations")).filter((f) => f.endsWith(".sql"))).toEqual(before)

    const renamed = npm(["db:generate", "--", "--name", "leads_rating", "--rename", "leads.score:leads.rating"])
    expect(renamed.status, renamed.output).toBe(0)
    const added = readdirSync(join(copy, "migrations")).filter((f) => f.endsWith(".sql") && !before.includes(f))
    expect(added).toEqual([expect.stringMatching(/^\d{4}_leads_rating\.sql$/)])
    expect(readFileSync(join(copy, "migrations", added[0]), "utf8")).toContain('ALTER TABLE `leads` RENAME COLUMN "score" TO "rating";')
    // The guide names the file the real run wrote (FACTLINE_UPDATE_DOCS=1 writes it).
    const shown = /migrations\/(\d{4}_leads_rating\.sql)/
    if (process.env.FACTLINE_UPDATE_DOCS === "1") writeFileSync(guidePath, readFileSync(guidePath, "utf8").replace(shown, `migrations/${added[0]}`))
    expect(shown.exec(readFileSync(guidePath, "utf8"))?.[1]).toBe(added[0])
  }, 120_000)
})
