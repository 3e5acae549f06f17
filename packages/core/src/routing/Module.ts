/**
 * A module: what one product team registers, grouped under a name —
 * handlers and deciders for messages, fact processors, projections.
 * Building the router from modules is where conflicts are caught (see Router).
 */
import type { Processor } from "../processing/Processor.js"
import type { Projection } from "../projections/Projection.js"
import type * as Handler from "./Handler.js"

export interface Module {
  readonly name: string
  readonly handlers: ReadonlyArray<Handler.Any>
  readonly processors: ReadonlyArray<Processor>
  readonly projections: ReadonlyArray<Projection>
}

export const make = (
  name: string,
  parts: {
    readonly handlers?: ReadonlyArray<Handler.Any>
    readonly processors?: ReadonlyArray<Processor>
    readonly projections?: ReadonlyArray<Projection>
  }
): Module => ({
  name,
  handlers: parts.handlers ?? [],
  processors: parts.processors ?? [],
  projections: parts.projections ?? []
})
