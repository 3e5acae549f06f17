/**
 * new:module's --workflow in an app of its own (the example's full run, migration, typecheck and specs included, is
 * apps/example/test/scaffold.node.test.mjs): the module gets its workflow, its Notifier and the WorkflowSpecs; an app
 * whose wrangler config lacks the Workflows binding is told what to add, one that has it is not; without the flag,
 * nothing of a workflow is written.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { run } from "./new-module.ts"

const root = mkdtempSync(join(tmpdir(), "factline-new-module-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const app = (name, wrangler) => {
  const dir = join(root, name)
  mkdirSync(join(dir, "src"), { recursive: true })
  writeFileSync(join(dir, "src", "modules.ts"), `import { orders } from "./orders/Orders.js"\n\nexport const modules = [orders] as const\n`)
  if (wrangler !== undefined) writeFileSync(join(dir, "wrangler.jsonc"), wrangler)
  return dir
}
const scaffold = async (argv) => {
  let out = ""
  let err = ""
  const code = await run(argv, { out: (s) => void (out += s), err: (s) => void (err += s) })
  return { code, out, err }
}

describe("new:module --workflow", () => {
  it("writes the workflow, its notifier and its specs, and says what to add to an app without the Workflows binding", async () => {
    const dir = app("plain", `{ "name": "my-platform", "main": "src/index.ts" }\n`)
    const { code, out } = await scaffold(["signups", "--app", dir, "--workflow", "--no-migration"])
    expect(code).toBe(0)
    const module = readFileSync(join(dir, "src/signups/Signups.ts"), "utf8")
    expect(module).toContain(`name: "follow-up-signups"`)
    expect(module).toContain(`execute: Effect.flatMap(Activity.idempotencyKey("notify"), (key) => notifier.notify(qualified.data.id, key))`)
    expect(module).toContain("workflows: [followUpSignups],")
    expect(module).toContain("layer: SignupsNotifier.layer")
    expect(readFileSync(join(dir, "src/signups/Notifier.ts"), "utf8")).toContain(`Config.String("SIGNUPS_FOLLOW_UP_AFTER")`)
    const spec = readFileSync(join(dir, "test/signups.spec.ts"), "utf8")
    expect(spec).toContain("WorkflowSpec.for(followUpSignups, { layer: notifier.layer })")
    expect(spec).toContain(".thenNotStarted()")
    expect(out).toContain("created ")
    expect(out).toMatch(/add the Workflows binding to \S*plain\/wrangler\.jsonc \(top level and each env\):/)
    expect(out).toContain(`"workflows": [{ "name": "factline-workflows", "binding": "FACTLINE_WORKFLOWS", "class_name": "FactlineWorkflow" }]`)
    expect(out).toContain(`export { FactlineWorkflow } from "@factline/workers"`)
  })

  it("says nothing of the binding to an app that has it, and writes no workflow without the flag", async () => {
    const bound = app("bound", `{ "workflows": [{ "name": "factline-workflows", "binding": "FACTLINE_WORKFLOWS", "class_name": "FactlineWorkflow" }] }\n`)
    const withFlag = await scaffold(["signups", "--app", bound, "--workflow", "--no-migration"])
    expect(withFlag.code).toBe(0)
    expect(withFlag.out).not.toContain("add the Workflows binding")

    const plain = app("without", undefined)
    const without = await scaffold(["leads", "--app", plain, "--no-migration"])
    expect(without.code).toBe(0)
    expect(existsSync(join(plain, "src/leads/Notifier.ts"))).toBe(false)
    expect(readFileSync(join(plain, "src/leads/Leads.ts"), "utf8")).not.toContain("Workflow")
    expect(readFileSync(join(plain, "test/leads.spec.ts"), "utf8")).not.toContain("WorkflowSpec")
    // Each module gets its property spec: every handler and processor fed inputs drawn from their schemas.
    expect(readFileSync(join(plain, "test/leads.properties.spec.ts"), "utf8")).toContain(`import { leads } from "../src/leads/Leads.js"`)
    expect(readFileSync(join(plain, "test/leads.properties.spec.ts"), "utf8")).toContain("PropertySpec.check(leads, { runs: 100 })")
    expect(without.out).toMatch(/^created \S*test\/leads\.properties\.spec\.ts$/m)
    expect(without.out).not.toContain("add the Workflows binding")
  })
})
