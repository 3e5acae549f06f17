/**
 * A module: what one product team registers, grouped under a name —
 * handlers and deciders for messages, fact processors, projections, and the
 * `layer` providing the services its handlers, deciders and processors
 * require (a pricing service, a client). The registry (`registry/Registry.ts`)
 * is built from modules at startup and is where conflicts between them are
 * caught; the runtime builds each module's layer once per isolate
 * (`registry/ModuleLayers.ts`).
 *
 * A requirement the layer does not provide is a compile error at `layer`
 * (or a missing `layer`), naming the service. Projection mappings are pure
 * functions of a fact: they require nothing.
 */
import type { Layer } from "effect"
import type * as Handler from "./Handler.js"
import * as Naming from "./Naming.js"
import type * as Processor from "./Processor.js"
import type { Projection } from "./Projection.js"
import type * as Webhook from "./Webhook.js"
import type * as Workflow from "./Workflow.js"

export interface Module<Tables extends object = object> {
  readonly name: string
  readonly handlers: ReadonlyArray<Handler.Any>
  readonly processors: ReadonlyArray<Processor.Any>
  readonly projections: ReadonlyArray<Projection>
  /** The webhook events this module publishes (its part of the catalog). */
  readonly webhooks: ReadonlyArray<Webhook.Any>
  /** Its workflows: multi-step work started by a fact (Workflow.ts), run on Cloudflare Workflows. */
  readonly workflows: ReadonlyArray<Workflow.Any>
  /** The module's Drizzle tables (its projections' tables), for the app's Drizzle schema. */
  readonly tables: Tables
  /** The services its handlers, deciders and processors require, as one layer (none: they require nothing). */
  readonly layer: AnyLayer | undefined
}

/** A module's layer, whatever it provides: self-contained (it requires nothing), it may fail to build. */
export type AnyLayer = Layer.Layer<never, unknown, never>

/** What the handlers `H`, processors `P` and workflows `W` require that `Provided` does not provide (`never`: nothing). */
export type Missing<H extends ReadonlyArray<Handler.Any>, P extends ReadonlyArray<Processor.Any>, Provided, W extends ReadonlyArray<Workflow.Any> = []> = Exclude<
  Handler.ServicesOf<H[number]> | Processor.ServicesOf<P[number]> | Workflow.ServicesOf<W[number]>,
  Provided
>

/** The compile error of a requirement no layer provides: it names the service(s) under this key. */
export interface MissingServices<M> {
  readonly "the module's layer does not provide": M
}

type IsAny<T> = 0 extends 1 & T ? true : false

/**
 * Nothing when every requirement is provided; otherwise `layer` must also be a `MissingServices<…>`, which
 * no layer is: the compile error names what is missing. Code typed `Handler.Any` (its requirement erased)
 * cannot be checked here.
 */
export type Requires<M> = IsAny<M> extends true ? unknown : [M] extends [never] ? unknown : { readonly layer: MissingServices<M> }

export interface Parts<Tables extends object, H extends ReadonlyArray<Handler.Any>, P extends ReadonlyArray<Processor.Any>, Provided, W extends ReadonlyArray<Workflow.Any> = []> {
  readonly handlers?: H
  readonly processors?: P
  readonly workflows?: W
  readonly projections?: ReadonlyArray<Projection>
  readonly webhooks?: ReadonlyArray<Webhook.Any>
  /** Its Drizzle tables module (`import * as Tables from "./Tables.js"`): typed in the app's schema. */
  readonly tables?: Tables
  /** The services its handlers, deciders and processors require (`Layer.mergeAll(PricingLive, …)`); it may require nothing itself. */
  readonly layer?: Layer.Layer<Provided, unknown, never>
}

export const make = <
  Tables extends object = object,
  const H extends ReadonlyArray<Handler.Any> = [],
  const P extends ReadonlyArray<Processor.Any> = [],
  Provided = never,
  const W extends ReadonlyArray<Workflow.Any> = []
>(
  name: string,
  parts: Parts<Tables, H, P, Provided, W> & Requires<Missing<H, P, Provided, W>>
): Module<Tables> => ({
  name: Naming.check("module", name),
  handlers: parts.handlers ?? [],
  processors: parts.processors ?? [],
  projections: parts.projections ?? [],
  webhooks: parts.webhooks ?? [],
  workflows: parts.workflows ?? [],
  tables: parts.tables ?? ({} as Tables),
  layer: parts.layer as AnyLayer | undefined
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
