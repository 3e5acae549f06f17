/**
 * A Vite plugin for the workspace's own vitest configs: `@factline/<package>[/<subpath>]` resolves to the
 * TypeScript source its exports map names under the `@factline/source` condition, in every Vite environment
 * (Node, workerd). Published consumers never see it: for them the exports maps point at `dist/`.
 *
 * Why not `resolve.conditions`: vitest and @cloudflare/vitest-plugin each set their environments'
 * conditions, and adding one at the top level replaced the others' in the SSR environment (workerd lost
 * `workerd`/`worker`). Resolving our own packages by name touches nothing else.
 */
import { readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

export const sourceCondition = "@factline/source"
const packagesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "packages")
const specifier = /^@factline\/([a-z-]+)(\/.*)?$/

/** The source file `@factline/<name><subpath>` resolves to in the workspace, or undefined if it is not one of ours. */
export const sourceOf = (id) => {
  const match = specifier.exec(id)
  if (!match) return undefined
  const dir = join(packagesDir, match[1])
  let exportsMap
  try {
    exportsMap = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).exports
  } catch {
    return undefined
  }
  const target = exportsMap?.[`.${match[2] ?? ""}`]?.[sourceCondition]
  return typeof target === "string" ? join(dir, target) : undefined
}

export const workspaceSources = () => ({
  name: "factline-workspace-sources",
  enforce: "pre",
  resolveId: (id) => sourceOf(id)
})
