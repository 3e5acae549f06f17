/**
 * `factline new:version <module> <type> [--app DIR] [--no-snapshot]` (an app's `npm run new:version -- <module>
 * <type>`): adds the next version of a message or fact type. In the module's source it copies the latest schema
 * into a new one (`<Name>V<N+1> = Schema.Struct({ ...latest.fields })`, the place to add or change fields),
 * appends `.version(N+1, <Name>V<N+1>, upcaster)` with an upcaster stub to the definition, then writes the new
 * version's schema snapshot (the app's `test/schemas.spec.ts` with `FACTLINE_SNAPSHOTS=write`). Edit the new
 * schema and the upcaster: the type checker points at the stub until it builds every field the new version has.
 * Refuses (writing nothing) when the definition cannot be found or the new name is taken. It reads source text
 * (brackets, strings and comments), not the TypeScript AST: a definition it cannot follow is left to the hand.
 *
 * The app is the current directory or `--app DIR`.
 */
import { spawnSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, relative, resolve } from "node:path"
import * as Args from "./Args.js"
import { type Io, stdio } from "./Io.js"

export const usage = `usage: factline new:version <module> <type> [--app DIR] [--no-snapshot]   (e.g. orders order_placed)

  <module>        the module's folder under src/
  <type>          a fact type or a message type the module defines
  --app DIR       the app (default: the current directory)
  --no-snapshot   do not write the new version's schema snapshot`

/** The index just after the bracket closing the one at `open` (strings and comments skipped). */
const closing = (text: string, open: number): number => {
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
const args = (text: string, open: number, end: number): Array<string> => {
  const out: Array<string> = []
  let depth = 0
  let start = open + 1
  for (let i = open + 1; i < end - 1; i++) {
    const c = text[i]!
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

/** The app's `test/schemas.spec.ts` with `FACTLINE_SNAPSHOTS=write`, through its own vitest (its node_modules, or a workspace's above it). */
const writeSnapshots = (app: string): { readonly paths: ReadonlyArray<string>; readonly failure?: string } => {
  const vitest = join(dirname(createRequire(join(app, "package.json")).resolve("vitest/package.json")), "vitest.mjs")
  const run = spawnSync(process.execPath, [vitest, "run", "--config", "vitest.node.config.ts", "test/schemas.spec.ts"], {
    cwd: app, encoding: "utf8", env: { ...process.env, FACTLINE_SNAPSHOTS: "write", NODE_OPTIONS: "--disable-warning=ExperimentalWarning" }
  })
  const paths = [...`${run.stdout}`.replace(/\x1b\[[0-9;]*m/g, "").matchAll(/wrote (\S+\.json)/g)].map((m) => join(app, "src", m[1]!))
  return run.status === 0 ? { paths } : { paths, failure: `${run.stdout}\n${run.stderr}` }
}

/** The module source defining `type`: `export const X = FactDefinition.make("type", …)` or `MessageDefinition.event|command("type")`. */
const findDefinition = (dir: string, type: string) => {
  const escaped = type.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
  const starts = [
    { kind: "fact", pattern: new RegExp(`export const (\\w+) = FactDefinition\\.make\\(\\s*"${escaped}"`) },
    { kind: "message", pattern: new RegExp(`export const (\\w+) = MessageDefinition\\.(?:event|command)\\(\\s*"${escaped}"\\s*\\)`) }
  ] as const
  const files = readdirSync(dir).filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts")).map((f) => join(dir, f))
  let found: { file: string; text: string; kind: "fact" | "message"; name: string; start: number } | undefined
  for (const file of files) {
    const text = readFileSync(file, "utf8")
    for (const { kind, pattern } of starts) {
      const match = pattern.exec(text)
      if (match) found = { file, text, kind, name: match[1]!, start: match.index }
    }
  }
  return found
}

interface Version {
  readonly n: number
  readonly schema: string | undefined
  readonly at: number
}

export const run = async (argv: ReadonlyArray<string>, io: Io = stdio): Promise<number> => {
  let parsed
  try {
    parsed = Args.parse(argv, { values: ["app"], switches: ["no-snapshot"] })
  } catch (error) {
    if (!(error instanceof Args.ArgsError)) throw error
    io.err(`new:version: ${error.message}\n${usage}\n`)
    return 2
  }
  const { options, positional } = parsed
  if (options.help) {
    io.out(`${usage}\n`)
    return 0
  }
  const [module, type] = positional
  if (!module || !type || positional.length > 2) {
    io.err(`${usage}\n`)
    return 2
  }
  const fail = (message: string) => {
    io.err(`new:version: ${message}\n`)
    return 1
  }
  const app = resolve(options.app ?? ".")
  const shown = (path: string) => relative(process.cwd(), path)
  const dir = join(app, "src", module)
  if (!existsSync(dir)) return fail(`no module directory ${shown(dir)}`)

  const found = findDefinition(dir, type)
  if (!found) return fail(`no \`export const X = FactDefinition.make("${type}", …)\` or \`MessageDefinition.event|command("${type}")\` in ${shown(dir)}`)
  const { file, text, kind, name, start } = found

  // Walk the definition: its first call, then each `.version(n, Schema, upcaster?)` in the chain.
  const firstOpen = text.indexOf("(", text.indexOf(kind === "fact" ? "FactDefinition.make" : "MessageDefinition.", start))
  let end = closing(text, firstOpen)
  const versions: Array<Version> = kind === "fact" ? [{ n: 1, schema: args(text, firstOpen, end)[1], at: firstOpen }] : []
  for (;;) {
    const next = /^\s*\.version\(/.exec(text.slice(end))
    if (!next) break
    const open = end + next[0].length - 1
    const close = closing(text, open)
    const [n, schema] = args(text, open, close)
    versions.push({ n: Number(n), schema, at: open })
    end = close
  }
  if (versions.length === 0 || versions.some((v, i) => v.n !== i + 1 || !v.schema)) {
    return fail(`could not read the versions of ${name} in ${shown(file)}; add the version by hand: .version(N, Schema, (previous) => …)`)
  }
  const latest = versions.at(-1)!
  const N = latest.n
  const newName = `${name}V${N + 1}`
  if (new RegExp(`\\b${newName}\\b`).test(text)) return fail(`${newName} already exists in ${shown(file)}; nothing was written`)

  // The latest schema, by name: an inline schema is hoisted into `<Name>V<N>` first.
  let source = text
  let ref = latest.schema!
  const hoisted: Array<string> = []
  if (!/^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/.test(ref)) {
    ref = `${name}V${N}`
    if (new RegExp(`\\b${ref}\\b`).test(text)) return fail(`${ref} already exists in ${shown(file)}; nothing was written`)
    const at = source.indexOf(latest.schema!, latest.at)
    source = source.slice(0, at) + ref + source.slice(at + latest.schema!.length)
    end += ref.length - latest.schema!.length
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
  io.out(`${shown(file)}: ${name} gains version ${N + 1} (${newName}, copied from ${ref}) with an upcaster stub from version ${N}\n`)

  if (!options["no-snapshot"]) {
    const written = writeSnapshots(app)
    for (const path of written.paths) io.out(`wrote ${shown(path)}\n`)
    if (written.failure !== undefined) return fail(`the schema snapshot check still fails:\n${written.failure}`)
  }
  io.out(`
Next: edit ${newName} (the fields version ${N + 1} adds or changes) and the upcaster from version ${N}, then
  npm run snapshots:rewrite    # version ${N + 1} is not deployed yet: its snapshot follows your edits
  npm test\n`)
  return 0
}
