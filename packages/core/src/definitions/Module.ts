/**
 * A module: what one product team registers, grouped under a name —
 * handlers and deciders for messages, fact processors, projections. The
 * registry (`registry/Registry.ts`) is built from modules at startup and is
 * where conflicts between them are caught.
 */
import type * as Handler from "./Handler.js"
import * as Naming from "./Naming.js"
import type * as Processor from "./Processor.js"
import type { Projection } from "./Projection.js"
import type * as Webhook from "./Webhook.js"

export interface Module<Tables extends object = object> {
  readonly name: string
  readonly handlers: ReadonlyArray<Handler.Any>
  readonly processors: ReadonlyArray<Processor.Any>
  readonly projections: ReadonlyArray<Projection>
  /** The webhook events this module publishes (its part of the catalog). */
  readonly webhooks: ReadonlyArray<Webhook.Any>
  /** The module's Drizzle tables (its projections' tables), for the app's Drizzle schema. */
  readonly tables: Tables
}

export const make = <Tables extends object = object>(
  name: string,
  parts: {
    readonly handlers?: ReadonlyArray<Handler.Any>
    readonly processors?: ReadonlyArray<Processor.Any>
    readonly projections?: ReadonlyArray<Projection>
    readonly webhooks?: ReadonlyArray<Webhook.Any>
    /** Its Drizzle tables module (`import * as Tables from "./Tables.js"`): typed in the app's schema. */
    readonly tables?: Tables
  }
): Module<Tables> => ({
  name: Naming.check("module", name),
  handlers: parts.handlers ?? [],
  processors: parts.processors ?? [],
  projections: parts.projections ?? [],
  webhooks: parts.webhooks ?? [],
  tables: parts.tables ?? ({} as Tables)
})

type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never

/** The Drizzle tables of a list of modules, merged (typed): what `tablesOf(modules)` returns. */
export type TablesOf<M extends ReadonlyArray<Module<any>>> = UnionToIntersection<M[number]["tables"]>

/**
 * Every module's tables in one object, for the app's Drizzle schema:
 * `export const schema = { ...platformTables, ...Module.tablesOf(modules) }`.
 * Two modules exporting the same name is a startup error.
 */
export const tablesOf = <const M extends ReadonlyArray<Module<any>>>(modules: M): TablesOf<M> => {
  const merged: Record<string, unknown> = {}
  for (const module of modules) {
    for (const [name, table] of Object.entries(module.tables)) {
      if (name in merged && merged[name] !== table) throw new Error(`modules export two tables named ${name}; rename one (module ${module.name})`)
      merged[name] = table
    }
  }
  return merged as TablesOf<M>
}
