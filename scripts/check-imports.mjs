#!/usr/bin/env node
// The import graph of the packages' sources. Run directly (`npm test` in packages/core does): no folder of
// packages/core/src imports a folder that imports it back, directly or through others; prints every cycle
// with an example import per edge. Imported by scripts/check-architecture.mjs, which also checks file-level
// circles in every package (value imports enforced, type-only imports reported).
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

/** Every non-test TypeScript source under `dir`: `*.ts` without `*.test.ts` and `*.d.ts`, sorted. */
export const sourceFiles = (dir) => {
  const files = []
  const walk = (d) => {
    for (const name of readdirSync(d).sort()) {
      const path = join(d, name)
      if (statSync(path).isDirectory()) walk(path)
      else if (/\.ts$/.test(name) && !/\.(test|d)\.ts$/.test(name)) files.push(path)
    }
  }
  if (existsSync(dir)) walk(dir)
  return files
}

const regexAfterWord = new Set(["return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case", "do", "else", "yield", "await"])

/**
 * Two copies of `source`, each the same length with line breaks kept (so offsets and line numbers agree):
 * `code` with comments blanked, `bare` with comments and the contents of string, template and regex literals
 * blanked too (quotes, and the code inside `${…}`, stay). A match in `bare` is code, never text.
 */
export const lex = (source) => {
  const code = source.split("")
  const bare = source.split("")
  const n = source.length
  const blank = (chars, from, to) => {
    for (let k = from; k < to && k < n; k++) if (chars[k] !== "\n") chars[k] = " "
  }
  const templates = [] // the brace depth each open `${` returns at
  let depth = 0
  let i = 0
  let last = "" // the last significant character ("a" for a word), to tell a regex literal from a division
  let word = ""
  const templateText = () => {
    const start = i
    while (i < n) {
      const ch = source[i]
      if (ch === "\\") i += 2
      else if (ch === "`") return blank(bare, start, i++)
      else if (ch === "$" && source[i + 1] === "{") {
        blank(bare, start, i)
        i += 2
        templates.push(++depth)
        return
      } else i++
    }
    blank(bare, start, n)
  }
  while (i < n) {
    const ch = source[i]
    const next = source[i + 1]
    if (ch === "/" && (next === "/" || next === "*")) {
      const end = next === "/" ? source.indexOf("\n", i) : source.indexOf("*/", i + 2)
      const to = end < 0 ? n : next === "/" ? end : end + 2
      blank(code, i, to)
      blank(bare, i, to)
      i = to
    } else if (ch === '"' || ch === "'") {
      let j = i + 1
      while (j < n && source[j] !== ch && source[j] !== "\n") j += source[j] === "\\" ? 2 : 1
      blank(bare, i + 1, j)
      i = j + 1
      last = ch
    } else if (ch === "`") {
      i++
      templateText()
      last = "`"
    } else if (ch === "/" && (last === "" || "(,=:[!&|?{};+-*%<>~^".includes(last) || (last === "a" && regexAfterWord.has(word)))) {
      let j = i + 1
      let inClass = false
      while (j < n && source[j] !== "\n" && (source[j] !== "/" || inClass)) {
        if (source[j] === "\\") j++
        else if (source[j] === "[") inClass = true
        else if (source[j] === "]") inClass = false
        j++
      }
      blank(bare, i + 1, j)
      i = j + 1
      last = ")"
    } else if (ch === "}" && templates.length > 0 && templates[templates.length - 1] === depth) {
      templates.pop()
      depth--
      i++
      templateText()
      last = "`"
    } else if (/[\w$]/.test(ch)) {
      let j = i
      while (j < n && /[\w$]/.test(source[j])) j++
      word = source.slice(i, j)
      last = "a"
      i = j
    } else {
      if (ch === "{") depth++
      else if (ch === "}") depth--
      if (!/\s/.test(ch)) last = ch
      i++
    }
  }
  return { code: code.join(""), bare: bare.join("") }
}

/** 1-based line of an offset. */
export const lineAt = (text, offset) => {
  let line = 1
  for (let k = text.indexOf("\n"); k !== -1 && k < offset; k = text.indexOf("\n", k + 1)) line++
  return line
}

/**
 * The module specifiers a lexed source imports or re-exports, with their line and kind: "type" for
 * `import type` / `export type` / `typeof import(…)` (erased), "value" otherwise. Under the workspace's
 * `verbatimModuleSyntax`, `import { type A } from "./x.js"` stays in the output as `import {} from "./x.js"`,
 * so it is a value import (the module is still loaded); `inlineTypesOnly` marks it.
 */
export const importsOf = ({ code, bare }) => {
  const found = []
  const isCode = (offset) => bare[offset] === code[offset] && code[offset] !== " "
  const add = (match, offset, specifier, kind, inlineTypesOnly = false) => {
    if (isCode(offset)) found.push({ specifier, kind, inlineTypesOnly, line: lineAt(code, offset), text: match.replace(/\s+/g, " ").trim() })
  }
  for (const m of code.matchAll(/\b(import|export)\s+(type\s+)?([\w$*{},\s]*?)\s*from\s*(["'])([^"'\n]+)\4/g)) {
    const clause = m[3]
    const named = /^\{([^}]*)\}$/.exec(clause.trim())
    const inlineTypesOnly = !m[2] && named !== null && named[1].split(",").map((s) => s.trim()).filter(Boolean).every((s) => /^type\s/.test(s))
    add(m[0], m.index, m[5], m[2] ? "type" : "value", inlineTypesOnly)
  }
  for (const m of code.matchAll(/\bimport\s*(["'])([^"'\n]+)\1/g)) add(m[0], m.index, m[2], "value")
  for (const m of code.matchAll(/(\btypeof\s+)?\bimport\s*\(\s*(["'])([^"'\n]+)\2\s*\)/g)) add(m[0], m.index + (m[1]?.length ?? 0), m[3], m[1] ? "type" : "value")
  return found
}

/** The file a relative specifier names, if it is one of `known` (`./x.js` → `x.ts`, `./x` → `x.ts` or `x/index.ts`). */
const resolveRelative = (from, specifier, known) => {
  if (!specifier.startsWith(".")) return undefined
  const base = resolve(dirname(from), specifier)
  const candidates = [base.replace(/\.(m?js)$/, (_, ext) => (ext === "mjs" ? ".mts" : ".ts")), base, `${base}.ts`, join(base, "index.ts")]
  return candidates.find((c) => known.has(c))
}

/** file -> [{ to, kind, line, text, inlineTypesOnly }] over the relative imports between `files`. */
export const fileGraph = (files, read = (f) => lex(readFileSync(f, "utf8"))) => {
  const known = new Set(files)
  const edges = new Map(files.map((f) => [f, []]))
  for (const file of files) {
    for (const imp of importsOf(read(file))) {
      const to = resolveRelative(file, imp.specifier, known)
      if (to !== undefined) edges.get(file).push({ to, ...imp })
    }
  }
  return edges
}

/** Tarjan's strongly connected components of `nodes` under `next(v)`; only those that contain a cycle. */
export const cycles = (nodes, next) => {
  let index = 0
  const stack = []
  const state = new Map()
  const found = []
  const connect = (v) => {
    state.set(v, { index, low: index, onStack: true })
    index++
    stack.push(v)
    for (const w of next(v)) {
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
      if (component.length > 1 || next(v).includes(v)) found.push(component.sort())
    }
  }
  for (const v of nodes) if (!state.has(v)) connect(v)
  return found
}

/** The shortest path of edges from `start` to `goal` inside `within` (breadth first), or undefined. */
const shortestPath = (edges, start, goal, within, kinds) => {
  const previous = new Map([[start, null]])
  const queue = [start]
  while (queue.length > 0) {
    const v = queue.shift()
    for (const e of edges.get(v) ?? []) {
      if (!within.has(e.to) || !kinds.has(e.kind)) continue
      if (e.to === goal) {
        const path = [{ from: v, ...e }]
        for (let p = previous.get(v); p; p = previous.get(p.from)) path.unshift(p)
        return path
      }
      if (!previous.has(e.to)) {
        previous.set(e.to, { from: v, ...e })
        queue.push(e.to)
      }
    }
  }
  return undefined
}

/**
 * File-level import circles among `files`. `value`: circles of value imports (each: its files and one
 * shortest circle as edges `{ from, to, line, text }`). `typeOnly`: circles that exist only with the type
 * imports counted, each shown through one of its type imports.
 */
export const fileCycles = (files, read) => {
  const edges = fileGraph(files, read)
  const targets = (kinds) => (v) => [...new Set(edges.get(v).filter((e) => kinds.has(e.kind)).map((e) => e.to))]
  const valueKinds = new Set(["value"])
  const allKinds = new Set(["value", "type"])
  const circle = (component, kinds) => {
    const within = new Set(component)
    const first = component[0]
    return shortestPath(edges, first, first, within, kinds)
  }
  const value = cycles(files, targets(valueKinds)).map((component) => ({ files: component, path: circle(component, valueKinds) }))
  const valueSets = value.map((c) => c.files.join("\n"))
  const typeOnly = cycles(files, targets(allKinds))
    .filter((component) => !valueSets.includes(component.join("\n")))
    .map((component) => {
      const within = new Set(component)
      let best
      for (const from of component) {
        for (const e of edges.get(from)) {
          if (e.kind !== "type" || !within.has(e.to)) continue
          const back = e.to === from ? [] : shortestPath(edges, e.to, from, within, allKinds)
          if (back && (!best || back.length + 1 < best.length)) best = [{ from, ...e }, ...back]
        }
      }
      return { files: component, path: best }
    })
  return { value, typeOnly }
}

/** Folder-level cycles among the top folders of `srcRoot` (files at its root import freely). */
export const folderCycles = (srcRoot, files, read) => {
  const folderOf = (file) => {
    const rel = relative(srcRoot, file)
    return rel.includes(sep) ? rel.split(sep)[0] : "."
  }
  /** folder -> folder -> an example import { file, line, specifier } */
  const folders = new Map()
  for (const [file, list] of fileGraph(files, read)) {
    const from = folderOf(file)
    for (const e of list) {
      const to = folderOf(e.to)
      if (to === from || from === ".") continue
      if (!folders.has(from)) folders.set(from, new Map())
      if (!folders.get(from).has(to)) folders.get(from).set(to, { file, line: e.line, specifier: e.specifier })
    }
  }
  const found = cycles([...folders.keys()], (v) => [...(folders.get(v)?.keys() ?? [])])
  return { folders, cycles: found, folderCount: new Set(files.map(folderOf)).size }
}

const main = () => {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "..", "packages", "core", "src")
  const files = sourceFiles(root)
  const { folders, cycles: found, folderCount } = folderCycles(root, files)
  if (found.length > 0) {
    console.error("import graph: folders of packages/core/src that import each other back:")
    for (const component of found) {
      console.error(`  cycle: ${component.join(" <-> ")}`)
      for (const a of component) {
        for (const [b, e] of folders.get(a) ?? []) if (component.includes(b)) console.error(`    ${a} -> ${b}: ${relative(root, e.file)}:${e.line} imports ${e.specifier}`)
      }
    }
    process.exit(1)
  }
  const layers = [...folders.keys()].sort().map((f) => `${f} -> ${[...folders.get(f).keys()].sort().join(", ")}`)
  console.log(`import graph: ${files.length} files in ${folderCount} folders, no cycles\n  ${layers.join("\n  ")}`)
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) main()
