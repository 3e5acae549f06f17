/**
 * A module: what one product team registers, grouped under a name.
 *
 * Today a module holds handlers and deciders; projections, processors and
 * webhook subscriptions join it as those capabilities land. Building the router
 * from modules is where conflicts are caught (see Router).
 */
import type * as Handler from "./Handler.js"

export interface Module {
  readonly name: string
  readonly handlers: ReadonlyArray<Handler.Any>
}

export const make = (name: string, parts: { readonly handlers: ReadonlyArray<Handler.Any> }): Module => ({
  name,
  handlers: parts.handlers
})
