#!/usr/bin/env node
// `npm run new:version -- <module> <type>`: adds the next version of a message or fact type of the example
// app. In the module's source it copies the latest schema into a new one (`<Name>V<N+1> = Schema.Struct({
// ...latest.fields })`, the place to add or change fields), appends `.version(N+1, <Name>V<N+1>, upcaster)`
// with an upcaster stub to the definition, then writes the new version's schema snapshot
// (`npm run snapshots:write`). Edit the new schema and the upcaster: the type checker points at the stub
// until it builds every field the new version has. Refuses (writing nothing) when the definition cannot be
// found or the new name is taken.
import { spawnSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const app = join(dirname(fileURLToPath(import.meta.url)), "..")
const root = join(app, "..", "..")
const [module, type] = process.argv.slice(2).filter((a) => !a.startsWith("--"))
const snapshots = !process.argv.includes("--no-snapshot")

const fail = (message) => {
  console.error(`new:version: ${message}`)
  process.exit(1)
}
if (!module || !type) fail("usage: npm run new:version -- <module> <type>   (e.g. calls outcome, calls call.completed)")
const dir = join(app, "src", module)
if (!existsSync(dir)) fail(`no module directory ${relative(root, dir)}`)

/** The index just after the bracket closing the one at `open` (strings and comments skipped). */
const closing = (text, open) => {
  let depth = 0
  for (let i = open; i < text.length; i++) {
    const c = text[i]
    if (c === '"' || c === "'" || c === "`") {
      for (i++; i < text.length && text[i] !== c; i++) if (text[i] === "\\") i++
    } else if (c === "/" && text[i + 1] === "/") {
      i = text.indexOf("\n", i)
      if (i < 0) return -1
    } else if (c === "/" && text[i + 1] === "*") {
      i = text.indexOf("*/", i) + 1
    } else if (c === "(" || c === "[" || c === "{") depth++
    else if (c === ")" || c === "]" || c === "}") {
      depth--
      if (depth === 0) return i + 1
    }
  }
  return -1
}

/** The top-level arguments of the call whose `(` is at `open` (and `)` just before `end`), as trimmed source texts. */
const args = (text, open, end) => {
  const out = []
  let depth = 0
  let start = open + 1
  for (let i = open + 1; i < end - 1; i++) {
    const c = text[i]
    if (c === '"' || c === "'" || c === "`") {
      for (i++; i < end && text[i] !== c; i++) if (text[i] === "\\") i++
    } else if (c === "/" && text[i + 1] === "/") i = text.indexOf("\n", i)
    else if (c === "/" && text[i + 1] === "*") i = text.indexOf("*/", i) + 1
    else if ("([{".includes(c)) depth++
    else if (")]}".includes(c)) depth--
    else if (c === "," && depth === 0) {
      out.push(text.slice(start, i).trim())
      start = i + 1
    }
  }
  const last = text.slice(start, end - 1).trim()
  if (last !== "") out.push(last)
  return out
}

const escaped = type.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
const starts = [
  { kind: "fact", pattern: new RegExp(`export const (\\w+) = FactDefinition\\.make\\(\\s*"${escaped}"`) },
  { kind: "message", pattern: new RegExp(`export const (\\w+) = MessageDefinition\\.(?:event|command)\\(\\s*"${escaped}"\\s*\\)`) }
]
const files = readdirSync(dir).filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts")).map((f) => join(dir, f))
let found
for (const file of files) {
  const text = readFileSync(file, "utf8")
  for (const { kind, pattern } of starts) {
    const match = pattern.exec(text)
    if (match) found = { file, text, kind, name: match[1], start: match.index, head: match.index + match[0].length }
  }
}
if (!found) fail(`no \`export const X = FactDefinition.make("${type}", …)\` or \`MessageDefinition.event|command("${type}")\` in ${relative(root, dir)}`)
const { file, text, kind, name, start } = found

// Walk the definition: its first call, then each `.version(n, Schema, upcaster?)` in the chain.
const firstOpen = text.indexOf("(", text.indexOf(kind === "fact" ? "FactDefinition.make" : "MessageDefinition.", start))
let end = closing(text, firstOpen)
const versions = kind === "fact" ? [{ n: 1, schema: args(text, firstOpen, end)[1], at: firstOpen, close: end }] : []
for (;;) {
  const next = /^\s*\.version\(/.exec(text.slice(end))
  if (!next) break
  const open = end + next[0].length - 1
  const close = closing(text, open)
  const [n, schema] = args(text, open, close)
  versions.push({ n: Number(n), schema, at: open, close })
  end = close
}
if (versions.length === 0 || versions.some((v, i) => v.n !== i + 1 || !v.schema)) fail(`could not read the versions of ${name} in ${relative(root, file)}; add the version by hand: .version(N, Schema, (previous) => …)`)
const latest = versions.at(-1)
const N = latest.n
const newName = `${name}V${N + 1}`
if (new RegExp(`\\b${newName}\\b`).test(text)) fail(`${newName} already exists in ${relative(root, file)}; nothing was written`)

// The latest schema, by name: an inline schema is hoisted into `<Name>V<N>` first.
let source = text
let ref = latest.schema
const hoisted = []
if (!/^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/.test(ref)) {
  ref = `${name}V${N}`
  if (new RegExp(`\\b${ref}\\b`).test(text)) fail(`${ref} already exists in ${relative(root, file)}; nothing was written`)
  const at = source.indexOf(latest.schema, latest.at)
  source = source.slice(0, at) + ref + source.slice(at + latest.schema.length)
  end += ref.length - latest.schema.length
  hoisted.push(`export const ${ref} = ${latest.schema}`)
}
const previous = `v${N}`
const declarations = [
  ...hoisted,
  `/** ${type} version ${N + 1}: add or change fields here (a copy of version ${N}). */`,
  `export const ${newName} = Schema.Struct({ ...${ref}.fields })`,
  ""
].join("\n")
const upcaster = `(${previous}) => ({ ...${previous} /* version ${N + 1}: give every field it adds a value for stored version-${N} data */ })`
source = `${source.slice(0, start)}${declarations}${source.slice(start, end)}\n  .version(${N + 1}, ${newName}, ${upcaster})${source.slice(end)}`
writeFileSync(file, source)
console.log(`${relative(root, file)}: ${name} gains version ${N + 1} (${newName}, copied from ${ref}) with an upcaster stub from version ${N}`)

if (snapshots) {
  const vitest = join(root, "node_modules", "vitest", "vitest.mjs")
  const run = spawnSync(process.execPath, [vitest, "run", "--config", "vitest.node.config.ts", "test/schemas.spec.ts"], {
    cwd: app, encoding: "utf8", env: { ...process.env, FACTLINE_SNAPSHOTS: "write", NODE_OPTIONS: "--disable-warning=ExperimentalWarning" }
  })
  const written = [...`${run.stdout}`.replace(/\x1b\[[0-9;]*m/g, "").matchAll(/wrote (\S+\.json)/g)].map((m) => m[1])
  for (const path of written) console.log(`wrote ${relative(root, join(app, "src", path))}`)
  if (run.status !== 0) fail(`the schema snapshot check still fails:\n${run.stdout}\n${run.stderr}`)
}
console.log(`
Next: edit ${newName} (the fields version ${N + 1} adds or changes) and the upcaster from version ${N}, then
  npm run snapshots:rewrite    # version ${N + 1} is not deployed yet: its snapshot follows your edits
  npm run test:specs`)
