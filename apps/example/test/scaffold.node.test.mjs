/**
 * `npm run new:module -- <name>` run into a temporary copy of the repository: it writes the module, its
 * table, its specs, registers it in src/modules.ts and generates its migration; the copy then typechecks and
 * the generated specs pass unchanged. (Runs in Node; spawns the scaffold, drizzle-kit, tsc and vitest.)
 */
import { spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..")
const copy = mkdtempSync(join(tmpdir(), "factline-scaffold-"))
afterAll(() => rmSync(copy, { recursive: true, force: true }))

const run = (args, cwd) => {
  const result = spawnSync(process.execPath, args, { cwd, encoding: "utf8", timeout: 120_000 })
  return { status: result.status, output: `${result.stdout}\n${result.stderr}` }
}

describe("npm run new:module", () => {
  it("scaffolds a module whose generated specs pass unchanged, registered and migrated", () => {
    // The repository's tracked and new files (not node_modules, not build output), with node_modules linked.
    const listed = spawnSync("git", ["ls-files", "-co", "--exclude-standard"], { cwd: root, encoding: "utf8" }).stdout.split("\n").filter(Boolean)
    for (const file of listed) if (existsSync(join(root, file))) cpSync(join(root, file), join(copy, file))
    symlinkSync(join(root, "node_modules"), join(copy, "node_modules"), "dir")
    const migrationsBefore = readdirSync(join(copy, "migrations")).filter((f) => f.endsWith(".sql"))

    const scaffold = run(["apps/example/scripts/new-module.mjs", "tickets"], copy)
    expect(scaffold.status, scaffold.output).toBe(0)
    expect(scaffold.output).toContain("created apps/example/src/tickets/Tickets.ts")
    expect(readFileSync(join(copy, "apps/example/src/modules.ts"), "utf8")).toMatch(/import \{ tickets \} from "\.\/tickets\/Tickets\.js"[\s\S]*export const modules = \[calls, tickets\] as const/)
    const added = readdirSync(join(copy, "migrations")).filter((f) => f.endsWith(".sql") && !migrationsBefore.includes(f))
    expect(added).toHaveLength(1)
    expect(readFileSync(join(copy, "migrations", added[0]), "utf8")).toContain("CREATE TABLE `tickets`")

    // Running it again refuses to overwrite.
    const again = run(["apps/example/scripts/new-module.mjs", "tickets"], copy)
    expect(again.status).toBe(1)
    expect(again.output).toContain("already exists; nothing was written")
    expect(run(["apps/example/scripts/new-module.mjs", "Tickets"], copy).output).toContain('module name "Tickets" is not valid')

    const app = join(copy, "apps/example")
    const typecheck = run([join(root, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", "."], app)
    expect(typecheck.status, typecheck.output).toBe(0)
    const specs = run([join(root, "node_modules/vitest/vitest.mjs"), "run", "--config", "vitest.node.config.ts", "test/tickets.spec.ts"], app)
    expect(specs.status, specs.output).toBe(0)
    expect(specs.output.replace(/\x1b\[[0-9;]*m/g, "")).toMatch(/Tests\s+4 passed \(4\)/)
  }, 180_000)
})
