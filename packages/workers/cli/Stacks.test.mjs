/**
 * Stacks.mapStack: a defect's stack thrown in a bundle as `wrangler dev` writes it (`.wrangler/tmp/dev-…/index.js`
 * with its source map beside it, built here by esbuild as wrangler does) names the source's file and line; a
 * frame whose map is absent is left as it was.
 */
import { build } from "esbuild"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Stacks from "./Stacks.ts"

const app = mkdtempSync(join(tmpdir(), "factline-stacks-"))
afterAll(() => rmSync(app, { recursive: true, force: true }))

describe("Stacks.mapStack", () => {
  it("maps a local wrangler dev bundle's frames to src/…:line, and leaves a frame without a map alone", async () => {
    mkdirSync(join(app, "src", "orders"), { recursive: true })
    writeFileSync(join(app, "src", "orders", "Orders.ts"), [
      "export const decide = (total: number): number => {",
      "  if (total === 13) throw new TypeError(\"unlucky total\")",
      "  return total",
      "}",
      ""
    ].join("\n"))
    writeFileSync(join(app, "src", "index.ts"), "import { decide } from \"./orders/Orders.js\"\nexport const run = (n: number) => decide(n)\n")
    const outfile = join(app, ".wrangler", "tmp", "dev-abc123", "index.js")
    await build({ entryPoints: [join(app, "src", "index.ts")], bundle: true, format: "esm", sourcemap: "external", outfile, logLevel: "silent" })
    const { run } = await import(pathToFileURL(outfile).href)
    let stack = ""
    try {
      run(13)
    } catch (error) {
      stack = error.stack
    }
    expect(stack).toMatch(/\.wrangler\/tmp\/dev-abc123\/index\.js:\d+:\d+/)
    const mapped = Stacks.mapStack(stack, app)
    expect(mapped).toContain("TypeError: unlucky total")
    expect(mapped).toMatch(/src\/orders\/Orders\.ts:2:\d+/)
    expect(mapped).not.toContain("dev-abc123/index.js")

    const elsewhere = "TypeError: x\n    at f (file:///nowhere/.wrangler/tmp/dev-gone/index.js:210:62647)"
    expect(Stacks.mapStack(elsewhere, app)).toBe(elsewhere)
  })
})
