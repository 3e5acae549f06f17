#!/usr/bin/env node
// The import graph check CI runs (`npm test` in packages/core): no folder of packages/core/src imports a
// folder that imports it back, directly or through others. Prints every cycle with an example import per edge.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath } from "node:url"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..", "packages", "core", "src")
const files = []
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) walk(path)
    else if (/\.ts$/.test(name) && !/\.test\.ts$/.test(name)) files.push(path)
  }
}
walk(root)

const folderOf = (file) => {
  const rel = relative(root, file)
  return rel.includes(sep) ? rel.split(sep)[0] : "."
}
/** folder -> folder -> an example "file -> import" */
const edges = new Map()
for (const file of files) {
  const from = folderOf(file)
  const source = readFileSync(file, "utf8")
  for (const match of source.matchAll(/(?:import|export)\s[^;]*?from\s+["'](\.{1,2}\/[^"']+)["']/g)) {
    const target = resolve(dirname(file), match[1])
    const to = folderOf(target)
    if (to === from || from === ".") continue
    if (!edges.has(from)) edges.set(from, new Map())
    if (!edges.get(from).has(to)) edges.get(from).set(to, `${relative(root, file)} imports ${match[1]}`)
  }
}

// Tarjan's strongly connected components: any component of more than one folder is a cycle.
let index = 0
const stack = []
const state = new Map()
const cycles = []
const connect = (v) => {
  state.set(v, { index, low: index, onStack: true })
  index++
  stack.push(v)
  for (const w of edges.get(v)?.keys() ?? []) {
    if (!state.has(w)) {
      connect(w)
      state.get(v).low = Math.min(state.get(v).low, state.get(w).low)
    } else if (state.get(w).onStack) state.get(v).low = Math.min(state.get(v).low, state.get(w).index)
  }
  if (state.get(v).low === state.get(v).index) {
    const component = []
    let w
    do {
      w = stack.pop()
      state.get(w).onStack = false
      component.push(w)
    } while (w !== v)
    if (component.length > 1) cycles.push(component)
  }
}
for (const v of edges.keys()) if (!state.has(v)) connect(v)

if (cycles.length > 0) {
  console.error("import graph: folders of packages/core/src that import each other back:")
  for (const component of cycles) {
    console.error(`  cycle: ${component.sort().join(" <-> ")}`)
    for (const a of component) for (const [b, example] of edges.get(a) ?? []) if (component.includes(b)) console.error(`    ${a} -> ${b}: ${example}`)
  }
  process.exit(1)
}
const layers = [...edges.keys()].sort().map((f) => `${f} -> ${[...edges.get(f).keys()].sort().join(", ")}`)
console.log(`import graph: ${files.length} files in ${new Set(files.map(folderOf)).size} folders, no cycles\n  ${layers.join("\n  ")}`)
