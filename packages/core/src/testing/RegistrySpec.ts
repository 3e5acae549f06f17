/**
 * `RegistrySpec.check(modules, { sources })`: the app's registry, built in a test exactly as the Worker
 * builds it at start-up — every check on (the specs turn `requireEmitters` off to test one piece alone;
 * this does not) — plus the one mistake the Worker cannot see: a module defined under `src/` but missing
 * from the `modules` list. A failure throws the registry's own message, so `npm test` says what
 * `wrangler dev` or the deploy would, before either runs.
 *
 * ```ts
 * /// <reference types="vite/client" />
 * it("the registry of src/modules.ts passes the Worker's start-up checks", () =>
 *   RegistrySpec.check(modules, { sources: import.meta.glob("../src/*\/**\/*.ts", { eager: true }) }))
 * ```
 *
 * `sources` is what vitest's `import.meta.glob(…, { eager: true })` returns: each file's path and its
 * exports. Any export shaped like a module (`Module.make`'s result) that is not in `modules` fails.
 *
 * It also probes every projection mapping with values drawn from its fact's schema (MappingProbe): a
 * mapping writing a column its table does not have fails here, naming the projection, the fact type, the
 * column and the table's columns — before a spec or a real fact applies it.
 */
import type { Module } from "../definitions/Module.js"
import * as Modules from "../definitions/Module.js"
import * as Registry from "../registry/Registry.js"
import * as MappingProbe from "./MappingProbe.js"

export interface Options {
  /** The app's source files and their exports: `import.meta.glob("../src/*\/**\/*.ts", { eager: true })`. */
  readonly sources?: Readonly<Record<string, unknown>>
  /** Where the list lives, for the message (default `src/modules.ts`). */
  readonly modulesFile?: string
}

const isModule = (value: unknown): value is Module =>
  typeof value === "object" && value !== null &&
  typeof (value as Module).name === "string" &&
  ["handlers", "processors", "projections", "webhooks"].every((key) => Array.isArray((value as unknown as Record<string, unknown>)[key])) &&
  typeof (value as Module).tables === "object"

/** Throws a `RegistryConfigError` with the registry's message if the Worker would refuse these modules. */
export const check = (modules: ReadonlyArray<Module>, options: Options = {}): Registry.Shape => {
  const registry = Registry.make(modules)
  Modules.tablesOf(modules)
  for (const module of modules) {
    for (const projection of module.projections) {
      const [problem] = MappingProbe.problems(projection)
      if (problem !== undefined) throw new Registry.RegistryConfigError(`${problem} (module ${module.name})`)
    }
  }
  const listed = new Set<unknown>(modules)
  const file = options.modulesFile ?? "src/modules.ts"
  for (const [path, exports] of Object.entries(options.sources ?? {})) {
    if (typeof exports !== "object" || exports === null) continue
    for (const [name, value] of Object.entries(exports)) {
      if (!isModule(value) || listed.has(value)) continue
      const where = path.replace(/^(\.\.?\/)+/, "")
      throw new Registry.RegistryConfigError(
        `module "${value.name}" (export ${name} of ${where}) is not registered: add it to the modules list in ${file} (import { ${name} } from "./${where.replace(/^src\//, "").replace(/\.ts$/, ".js")}")`
      )
    }
  }
  return registry
}
