/**
 * Which facts the projections consumer copies to D1's `facts` table: the setting `FACTLINE_FACTS_COPY`.
 *
 * The ledger (Durable Objects) holds every fact and answers a stream's facts by itself (`GET
 * /v1/facts?subject=`, traces, exports, rebuilds); the D1 copy exists only for what needs SQL over many
 * streams — an analyst's query, `GET /v1/facts` without a subject. D1 bills each copied fact as a row
 * written and keeps ~400 B of it for the window, so the copy is opt-in: `none` (the framework's default:
 * no copy row for facts nobody reads from D1), `all`, or a comma-separated list of fact types
 * (`charge,refund`). Readers of the copy ask `holds` before answering, so a query the copy cannot answer
 * is refused with the setting named, never answered with a page that silently misses facts.
 *
 * It parses and answers; it does not read the environment (Settings does, and the composition provides the
 * parsed value as the `FactsCopySetting` service) nor write anything.
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import * as Naming from "../definitions/Naming.js"

export type FactsCopy =
  | { readonly kind: "none" }
  | { readonly kind: "all" }
  | { readonly kind: "types"; readonly types: ReadonlySet<string> }

/** The setting in effect, as the projections consumer and the facts listing read it. */
export class FactsCopySetting extends Context.Service<FactsCopySetting, FactsCopy>()("@factline/core/FactsCopy") {
  static readonly layer = (copy: FactsCopy) => Layer.succeed(FactsCopySetting, copy)
}

/** The variable, for messages. */
export const variable = "FACTLINE_FACTS_COPY"

export const none: FactsCopy = { kind: "none" }
export const all: FactsCopy = { kind: "all" }
/** The framework's default: nothing copied. */
export const defaultCopy: FactsCopy = none

/** The setting from its text (absent or empty: the default), or the message saying what is wrong with it. */
export const parse = (raw: string | undefined): FactsCopy | string => {
  const text = raw?.trim() ?? ""
  if (text === "") return defaultCopy
  if (text === "none") return none
  if (text === "all") return all
  const types = text.split(",").map((t) => t.trim())
  const bad = types.filter((t) => !Naming.isValid(t) || t === "none" || t === "all")
  if (bad.length > 0) {
    return `${variable}: must be none, all, or fact types separated by commas (${Naming.rule}), got ${JSON.stringify(raw)}`
  }
  return { kind: "types", types: new Set(types) }
}

/** Whether facts of `type` are copied. */
export const copies = (copy: FactsCopy, type: string): boolean =>
  copy.kind === "all" || (copy.kind === "types" && copy.types.has(type))

/**
 * Whether the copy holds every fact a listing asks for: of `type` when given, of every type otherwise
 * (only `all` does: a list of types leaves the others out).
 */
export const holds = (copy: FactsCopy, type: string | undefined): boolean =>
  type === undefined ? copy.kind === "all" : copies(copy, type)

/** The setting as it reads: `none`, `all`, or the types. */
export const render = (copy: FactsCopy): string => (copy.kind === "types" ? [...copy.types].sort().join(",") : copy.kind)
