/**
 * Content negotiation on `Accept` (RFC 9110 §12.5.1) for the routes that answer more than one media type
 * (the fact reads: factline's JSON or a CloudEvents batch). The offered type the client weights highest
 * wins; a media type's weight comes from the most specific range that matches it (`type/subtype` over
 * `type/*` over `*∕*`), and `q=0` means "not acceptable". On equal weight the more specific match wins, then
 * the range the client listed first (as the `negotiator` package does), then the route's order (its first
 * type is its default).
 *
 * A header that names none of the offered types is disregarded and the default answered, as RFC 9110
 * allows and as before negotiation existed; a header that refuses every offered type (`*∕*;q=0`, or each
 * one by name) is a 406 `not_acceptable` naming what the route offers. It does not negotiate charsets,
 * languages or encodings, and media type parameters other than `q` do not take part.
 */
import { RequestRefused } from "./Problem.js"

interface Range {
  readonly type: string
  readonly subtype: string
  readonly q: number
  /** Its position in the header. */
  readonly index: number
}

const token = /^[!#$%&'*+.^_`|~0-9a-z-]+$/u
const qvalue = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/u

/** The media ranges of an `Accept` value; a malformed range (or `q`) is skipped, not guessed at. */
export const ranges = (accept: string): ReadonlyArray<Range> =>
  accept.split(",").flatMap((part, index): Array<Range> => {
    const [range = "", ...parameters] = part.split(";")
    const [type = "", subtype = "", ...rest] = range.trim().toLowerCase().split("/")
    if (rest.length > 0 || !token.test(type) || !token.test(subtype) || (type === "*" && subtype !== "*")) return []
    let q = 1
    for (const parameter of parameters) {
      const [name = "", value = ""] = parameter.split("=").map((s) => s.trim())
      if (name.toLowerCase() !== "q") continue
      if (!qvalue.test(value)) return []
      q = Number(value)
    }
    return [{ type, subtype, q, index }]
  })

/** The weight of one media type under the ranges: its most specific range's `q`, or undefined if none names it. */
const weigh = (accepted: ReadonlyArray<Range>, mediaType: string): Weight | undefined => {
  const [type, subtype] = mediaType.split("/")
  let best: Weight | undefined
  for (const range of accepted) {
    const specificity = range.type === type && range.subtype === subtype ? 2 : range.type === type && range.subtype === "*" ? 1 : range.type === "*" ? 0 : -1
    if (specificity >= 0 && (best === undefined || specificity > best.specificity)) best = { q: range.q, specificity, index: range.index }
  }
  return best
}

interface Weight {
  readonly q: number
  readonly specificity: number
  readonly index: number
}

const preferred = (a: Weight, b: Weight) =>
  a.q !== b.q ? a.q > b.q : a.specificity !== b.specificity ? a.specificity > b.specificity : a.index < b.index

/**
 * The media type to answer with, of `offered` (the first is the default): the acceptable one the client
 * weights highest; the default when the header is absent or names none of them. Throws a 406
 * `RequestRefused` when the header refuses every one.
 */
export const negotiate = <const T extends string>(accept: string | undefined, offered: readonly [T, ...Array<T>]): T => {
  if (accept === undefined || accept.trim() === "") return offered[0]
  const accepted = ranges(accept)
  const weighed = offered.map((type) => ({ type, weight: weigh(accepted, type) }))
  let chosen: (typeof weighed)[number] | undefined
  for (const candidate of weighed) {
    const w = candidate.weight
    if (w === undefined || w.q === 0) continue
    if (chosen?.weight === undefined || preferred(w, chosen.weight)) chosen = candidate
  }
  if (chosen !== undefined) return chosen.type
  if (weighed.every((w) => w.weight !== undefined)) {
    throw new RequestRefused({ status: 406, message: `none of the media types this route answers is acceptable (Accept: ${accept.slice(0, 200)}); it answers ${offered.join(" or ")}` })
  }
  return weighed.find((w) => w.weight === undefined)!.type
}
