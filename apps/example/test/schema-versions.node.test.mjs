/**
 * The schema snapshot check and `npm run new:version`, run in a temporary copy of the repository: a fact
 * schema changed without a new version fails the example's specs, naming the fix; `new:version` then adds
 * the version (schema copy + upcaster stub), writes its snapshot, and the copy typechecks and passes again.
 * (Runs in Node; spawns vitest, the scaffold and tsc.)
 */
import { spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..")
const copy = mkdtempSync(join(tmpdir(), "factline-versions-"))
afterAll(() => rmSync(copy, { recursive: true, force: true }))

const run = (args, cwd, env = {}) => {
  const result = spawnSync(process.execPath, args, { cwd, encoding: "utf8", timeout: 120_000, env: { ...process.env, ...env } })
  return { status: result.status, output: `${result.stdout}\n${result.stderr}`.replace(/\x1b\[[0-9;]*m/g, "") }
}

describe("schema snapshots and new:version", () => {
  it("a schema changed without a new version fails the specs; new:version adds the version and its snapshot", () => {
    const listed = spawnSync("git", ["ls-files", "-co", "--exclude-standard"], { cwd: root, encoding: "utf8" }).stdout.split("\n").filter(Boolean)
    for (const file of listed) if (existsSync(join(root, file))) cpSync(join(root, file), join(copy, file))
    symlinkSync(join(root, "node_modules"), join(copy, "node_modules"), "dir")
    const app = join(copy, "apps/example")
    const calls = join(app, "src/calls/Calls.ts")
    const original = readFileSync(calls, "utf8")
    const specs = () => run([join(root, "node_modules/vitest/vitest.mjs"), "run", "--config", "vitest.node.config.ts", "test/schemas.spec.ts"], app)
    expect(specs().status).toBe(0)

    // A field added to a released fact schema, in place: the check fails, naming the fact, its version and the fix.
    writeFileSync(calls, original.replace(
      'FactDefinition.make("qualification", Schema.Struct({ call_id: Id, qualified: Schema.Boolean }))',
      'FactDefinition.make("qualification", Schema.Struct({ call_id: Id, qualified: Schema.Boolean, score: Schema.Int }))'
    ))
    const changed = specs()
    expect(changed.status).not.toBe(0)
    expect(changed.output).toContain("the schema of fact qualification version 1 (module calls) changed without a new version")
    expect(changed.output).toContain("add version 2 with an upcaster instead: `npm run new:version -- calls qualification`")

    // The right way: undo, then new:version scaffolds version 2 and writes its snapshot.
    writeFileSync(calls, original)
    const scaffold = run(["apps/example/scripts/new-version.mjs", "calls", "qualification"], copy)
    expect(scaffold.status, scaffold.output).toBe(0)
    expect(scaffold.output).toContain("Qualification gains version 2 (QualificationV2, copied from QualificationV1)")
    expect(scaffold.output).toContain("wrote apps/example/src/calls/schemas/qualification.v2.json")
    const source = readFileSync(calls, "utf8")
    expect(source).toContain("export const QualificationV2 = Schema.Struct({ ...QualificationV1.fields })")
    expect(source).toMatch(/\.version\(2, QualificationV2, \(v1\) => \(\{ \.\.\.v1 \/\*/)
    expect(readFileSync(join(app, "src/calls/schemas/qualification.v2.json"), "utf8")).toBe(readFileSync(join(app, "src/calls/schemas/qualification.v1.json"), "utf8"))
    expect(specs().status).toBe(0)
    const typecheck = run([join(root, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", "."], app)
    expect(typecheck.status, typecheck.output).toBe(0)

    // Version 2 gains a field before it is deployed: rewrite accepts it; version 1's snapshot is untouched.
    writeFileSync(calls, readFileSync(calls, "utf8").replace("Schema.Struct({ ...QualificationV1.fields })", "Schema.Struct({ ...QualificationV1.fields, score: Schema.Int })")
      .replace(/\(v1\) => \(\{ \.\.\.v1 \/\*[^*]*\*\/ \}\)/, "(v1) => ({ ...v1, score: 0 })"))
    expect(specs().output).toContain("fact qualification version 2 (module calls) changed without a new version")
    expect(run([join(root, "node_modules/vitest/vitest.mjs"), "run", "--config", "vitest.node.config.ts", "test/schemas.spec.ts"], app, { FACTLINE_SNAPSHOTS: "rewrite" }).status).toBe(0)
    expect(readFileSync(join(app, "src/calls/schemas/qualification.v2.json"), "utf8")).toContain('"score"')
    expect(specs().status).toBe(0)
  }, 240_000)
})
