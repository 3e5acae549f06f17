import { describe, expect, it } from "vitest"
import { Cause, ConfigProvider, Effect, Exit, Layer } from "effect"
import * as Settings from "../composition/Settings.js"
import * as FactsCopy from "./FactsCopy.js"

describe("FACTLINE_FACTS_COPY", () => {
  it("defaults to none: no copy row for facts nobody reads from D1", () => {
    expect(FactsCopy.parse(undefined)).toEqual({ kind: "none" })
    expect(FactsCopy.parse(" ")).toEqual({ kind: "none" })
    expect(FactsCopy.copies(FactsCopy.defaultCopy, "charge")).toBe(false)
  })

  it("all copies every type; a list only its types, and only all holds a listing of every type", () => {
    const list = FactsCopy.parse("charge, refund")
    expect(list).toEqual({ kind: "types", types: new Set(["charge", "refund"]) })
    if (typeof list === "string") throw new Error(list)
    expect([FactsCopy.copies(list, "charge"), FactsCopy.copies(list, "outcome")]).toEqual([true, false])
    expect([FactsCopy.holds(list, "refund"), FactsCopy.holds(list, undefined), FactsCopy.holds(FactsCopy.all, undefined)]).toEqual([true, false, true])
    expect(FactsCopy.render(list)).toBe("charge,refund")
  })

  it("a value that is not none, all or fact type names fails the runtime with a message naming the variable", () => {
    for (const raw of ["charge,,refund", "Charge", "all,charge", "charge;refund"]) {
      expect(FactsCopy.parse(raw)).toMatch(/^FACTLINE_FACTS_COPY: must be none, all, or fact types/)
      const layer = Settings.Settings.layer.pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromUnknown({ FACTLINE_FACTS_COPY: raw }))))
      const exit = Effect.runSyncExit(Effect.service(Settings.Settings).pipe(Effect.provide(layer)))
      if (!Exit.isFailure(exit)) throw new Error(`${raw} was accepted`)
      expect(String(Cause.squash(exit.cause))).toContain("FACTLINE_FACTS_COPY")
    }
  })
})
