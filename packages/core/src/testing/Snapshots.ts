/**
 * The schema snapshot check of an app, for its Node tests: every message and fact version its modules
 * define has a committed JSON Schema file, `src/<module>/schemas/<type>.v<N>.json`, equal to the code's
 * (interop/SchemaSnapshots). A schema changed without a new version, a version without its file, a file
 * without its version: the check fails, listing each with the command that fixes it.
 *
 * ```ts
 * it("every schema version has its snapshot", () => checkSchemaSnapshots({ modules })) // src/, from the app's directory
 * ```
 *
 * Run with `FACTLINE_SNAPSHOTS=write` it writes the missing files (new types and versions) and still fails
 * on changed ones; with `FACTLINE_SNAPSHOTS=rewrite` it also rewrites changed ones (a version that was never
 * deployed) — the app's `snapshots:write` / `snapshots:rewrite` scripts.
 */
import type { Module } from "../definitions/Module.js"
import * as SchemaSnapshots from "../interop/SchemaSnapshots.js"
import { SpecError } from "./Specs.js"

export interface Options {
  readonly modules: ReadonlyArray<Module>
  /** The app's source directory (the modules' directories are `<dir>/<module>`); default `src`, from the working directory (the app's, where its specs run). */
  readonly dir?: string
  /** `write`: write missing files; `rewrite`: also overwrite changed ones. Default: the `FACTLINE_SNAPSHOTS` environment variable, else check only. */
  readonly mode?: "check" | "write" | "rewrite"
  readonly commands?: SchemaSnapshots.Commands
}

/** What the check uses of Node (through `process.getBuiltinModule`: the kit's types are the Workers' only). */
interface Node {
  /** The Node process's environment variables (a test run's, not a Worker's bindings). */
  readonly variables: Readonly<Record<string, string | undefined>>
  readonly fs: {
    existsSync(path: string): boolean
    mkdirSync(path: string, options: { readonly recursive: boolean }): unknown
    readdirSync(path: string): Array<string>
    readFileSync(path: string, encoding: "utf8"): string
    writeFileSync(path: string, data: string): void
  }
}
const node = (): Node => {
  const process = (globalThis as { readonly process?: { readonly env: Node["variables"]; readonly getBuiltinModule?: (id: string) => unknown } }).process
  if (process?.getBuiltinModule === undefined) throw new Error("the schema snapshot check runs in Node (≥ 22.3), in the app's specs")
  return { variables: process.env, fs: process.getBuiltinModule("node:fs") as Node["fs"] }
}
const join = (...parts: ReadonlyArray<string>) => parts.join("/").replace(/\/+/g, "/")

/** The snapshot files present under the modules' `schemas` directories, by path relative to `dir`. */
const present = ({ fs: { existsSync, readdirSync, readFileSync } }: Node, dir: string, modules: ReadonlyArray<Module>): Map<string, string> => {
  const files = new Map<string, string>()
  for (const module of modules) {
    const relative = SchemaSnapshots.directory(module.name)
    const absolute = join(dir, relative)
    if (!existsSync(absolute)) continue
    for (const name of readdirSync(absolute).sort()) {
      if (SchemaSnapshots.parseFileName(name) !== undefined) files.set(`${relative}/${name}`, readFileSync(join(absolute, name), "utf8"))
    }
  }
  return files
}

/**
 * Checks (and in `write` / `rewrite` mode writes) the snapshots; returns the paths written. Throws a
 * `SpecError` listing every remaining problem, each with its fix.
 */
export const checkSchemaSnapshots = (options: Options): ReadonlyArray<string> => {
  const nodejs = node()
  const dir = options.dir ?? "src"
  const asked = nodejs.variables.FACTLINE_SNAPSHOTS
  const mode = options.mode ?? (asked === "write" ? "write" : asked === "rewrite" ? "rewrite" : "check")
  const snapshots = SchemaSnapshots.expected(options.modules)
  const problems = SchemaSnapshots.compare(snapshots, present(nodejs, dir, options.modules), options.commands)
  const written: Array<string> = []
  const remaining = problems.filter((p) => {
    const fixable = p.kind === "missing" ? mode !== "check" : p.kind === "changed" ? mode === "rewrite" : false
    if (!fixable) return true
    const snapshot = snapshots.find((s) => s.path === p.path)!
    nodejs.fs.mkdirSync(join(dir, SchemaSnapshots.directory(snapshot.module)), { recursive: true })
    nodejs.fs.writeFileSync(join(dir, p.path), snapshot.text)
    written.push(p.path)
    return false
  })
  for (const path of written) console.log(`wrote ${path}`)
  if (remaining.length > 0) {
    throw new SpecError(`${remaining.length} schema snapshot problem(s):\n${remaining.map((p) => `- ${p.message}`).join("\n")}`)
  }
  return written
}
