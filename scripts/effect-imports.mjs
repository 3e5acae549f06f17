#!/usr/bin/env node
// `node scripts/effect-imports.mjs FILE…`: rewrites value imports from effect's barrels ("effect", "effect/http-api",
// "effect/http") into per-module imports (`import * as Schema from "effect/Schema"`,
// `import * as OpenApi from "effect/http-api/OpenApi"`, `import { pipe } from "effect/Function"`); type-only names
// stay in an `import type { … } from "effect"`. esbuild bundles every export of a module imported through a
// barrel (evanw/esbuild#1420); `npm run check:architecture` names such imports, this fixes them
// (docs/performance.md "Bundle size"). Example: node scripts/effect-imports.mjs $(git grep -l 'from "effect"' -- '*.ts')
import { readFileSync, writeFileSync } from "node:fs"

const functions = new Set(["absurd", "cast", "flow", "hole", "identity", "pipe"])

export const rewrite = (source) =>
  source.replace(/import\s+(type\s+)?\{([^}]*)\}\s+from\s+"effect(\/http-api|\/http)?";?/g, (all, typeOnly, list, sub = "") => {
    if (typeOnly) return all
    const types = []
    const fns = []
    const lines = []
    for (const spec of list.split(",").map((s) => s.trim()).filter(Boolean)) {
      if (spec.startsWith("type ")) {
        types.push(spec.slice(5))
        continue
      }
      const [name, alias] = spec.split(/\s+as\s+/)
      if (sub === "" && functions.has(name)) fns.push(spec)
      else lines.push(`import * as ${alias ?? name} from "effect${sub}/${name}"`)
    }
    if (fns.length > 0) lines.unshift(`import { ${fns.join(", ")} } from "effect/Function"`)
    if (types.length > 0) lines.unshift(`import type { ${types.join(", ")} } from "effect${sub}"`)
    return lines.join("\n")
  })

const files = process.argv.slice(2)
let changed = 0
for (const file of files) {
  const source = readFileSync(file, "utf8")
  const out = rewrite(source)
  if (out !== source) {
    writeFileSync(file, out)
    changed++
  }
}
if (files.length > 0) console.log(`effect-imports: ${changed} of ${files.length} files rewritten`)
