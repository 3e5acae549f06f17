/** `Accept` negotiation (RFC 9110 §12.5.1) between a route's media types: weights, specificity, and q=0 as "not acceptable". */
import { describe, expect, it } from "vitest"
import * as Accept from "./Accept.js"
import { RequestRefused } from "./Problem.js"

const json = "application/json"
const batch = "application/cloudevents-batch+json"
const pick = (accept: string | undefined) => Accept.negotiate(accept, [json, batch])

describe("Accept negotiation", () => {
  it("answers the default without a header, or with one that names none of the offered types", () => {
    expect(pick(undefined)).toBe(json)
    expect(pick("")).toBe(json)
    expect(pick("*/*")).toBe(json)
    expect(pick("text/html")).toBe(json)
  })

  it("answers the offered type the client weights highest, the more specific range deciding a type's weight", () => {
    expect(pick(batch)).toBe(batch)
    expect(pick(`${json};q=0.5, ${batch}`)).toBe(batch)
    expect(pick(`${batch};q=0.4, ${json};q=0.5`)).toBe(json)
    expect(pick(`application/*;q=0.2, ${batch};q=0.3`)).toBe(batch)
    expect(pick(`*/*;q=0.9, ${json};q=0.1`)).toBe(batch)
    expect(pick(`APPLICATION/CloudEvents-Batch+JSON; charset=utf-8`)).toBe(batch)
  })

  it("on equal weight: the more specific match, then the range listed first", () => {
    expect(pick(`*/*, ${batch}`)).toBe(batch)
    expect(pick(`${batch}, ${json}`)).toBe(batch)
    expect(pick(`${json}, ${batch}`)).toBe(json)
  })

  it("never answers a type given q=0: the next acceptable one instead", () => {
    expect(pick(`${batch};q=0`)).toBe(json)
    expect(pick(`${batch};q=0, */*`)).toBe(json)
    expect(pick(`${batch} ; Q=0.000, ${json};q=0.1`)).toBe(json)
    expect(pick(`${json};q=0, ${batch};q=0.5`)).toBe(batch)
  })

  it("is a 406 when every offered type is refused", () => {
    for (const accept of ["*/*;q=0", "application/*;q=0", `${json};q=0, ${batch};q=0`, `*/*;q=0, text/html`]) {
      const refused = (() => {
        try {
          return pick(accept)
        } catch (error) {
          return error
        }
      })()
      expect(refused, accept).toBeInstanceOf(RequestRefused)
      expect((refused as RequestRefused).status).toBe(406)
      expect((refused as RequestRefused).code).toBe("not_acceptable")
    }
  })

  it("skips a malformed range (or q) instead of guessing at it", () => {
    expect(Accept.ranges(`${batch};q=2, ${batch};q=abc, nonsense, */json, ${json};q=0.5`)).toEqual([{ type: "application", subtype: "json", q: 0.5, index: 4 }])
    expect(pick(`${batch};q=1.5`)).toBe(json)
  })
})
