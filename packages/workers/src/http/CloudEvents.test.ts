/** Binary mode's header values, decoded as the CloudEvents HTTP binding (3.1.3.2) says — or refused. */
import { describe, expect, it } from "vitest"
import * as CloudEvents from "./CloudEvents.js"

const decoded = (raw: string) => CloudEvents.decodeHeaderValue(raw)

describe("CloudEvents binary mode header values", () => {
  it("percent-decode once, upper- or lower-case, into the attribute the structured mode carries as is", () => {
    expect(decoded("evt%201")).toEqual({ value: "evt 1" })
    expect(decoded("Euro%20%E2%82%AC%20%F0%9F%98%80")).toEqual({ value: "Euro € 😀" })
    expect(decoded("caf%c3%a9")).toEqual({ value: "café" })
    expect(decoded("100%2525")).toEqual({ value: "100%25" }) // one round only
    expect(decoded("%41bc")).toEqual({ value: "Abc" }) // unnecessarily encoded: accepted
    expect(decoded("/billing/x:1")).toEqual({ value: "/billing/x:1" })
    expect(decoded("%EF%BB%BFevt")).toEqual({ value: "\uFEFFevt" }) // a BOM is kept: not the same id as "evt"
  })

  it("unescape a double-quoted value first (older encoders), then percent-decode it", () => {
    expect(decoded('"evt 1"')).toEqual({ value: "evt 1" })
    expect(decoded('"a\\"b\\\\c%21"')).toEqual({ value: 'a"b\\c!' })
  })

  it("refuse what cannot be one value: invalid UTF-8 (as U+FFFD, how workerd hands it over), raw non-ASCII, bad % and quotes, overlong forms", () => {
    for (const raw of ["evt-\uFFFD", "evt-\u00FF", "café", "evt%", "evt%2", "evt%ZZ", "%C0%A0", "%FF", "%ED%A0%80", '"open', 'a"b', "%00x", "a\tb"]) {
      expect(decoded(raw), raw).toHaveProperty("problem")
    }
    expect(decoded("evt-\uFFFD")).toEqual({ problem: expect.stringContaining("not valid UTF-8") })
  })

  it("name every ce-* header at fault, and read the others as attributes", () => {
    const headers = new Headers({ "ce-specversion": "1.0", "ce-id": "evt%201", "ce-source": "/billing", "ce-subject": "bad%zz", "content-type": "application/json" })
    expect(CloudEvents.fromBinary(headers, { a: 1 }).problems).toEqual([{ path: "headers.ce-subject", message: expect.stringContaining("ce-subject holds a %") }])
    headers.set("ce-subject", "call%2F1")
    expect(CloudEvents.fromBinary(headers, { a: 1 })).toEqual({ event: { data: { a: 1 }, specversion: "1.0", id: "evt 1", source: "/billing", subject: "call/1" }, problems: [] })
  })
})
