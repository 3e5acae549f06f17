import { Effect, Result, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as Handler from "./Handler.js"
import * as MessageDefinition from "./MessageDefinition.js"
import * as Module from "./Module.js"
import * as Router from "./Router.js"

const V1 = Schema.Struct({ call_id: Schema.String, duration_s: Schema.Int })
const V2 = Schema.Struct({ call_id: Schema.String, duration_s: Schema.Int, currency: Schema.String })
const V3 = Schema.Struct({ call_id: Schema.String, duration_ms: Schema.Int, currency: Schema.String })
const Completed = MessageDefinition.event("call.completed")
  .version(1, V1)
  .version(2, V2, (v1) => ({ ...v1, currency: "USD" }))
  .version(3, V3, ({ duration_s, ...v2 }) => ({ ...v2, duration_ms: duration_s * 1000 }))

const handler = (name: string) => Handler.handler(Completed, { name, handle: (m) => Effect.succeed([{ type: "outcome", data: m.payload }]) })

const envelope = (schema_version: number, message_type = "call.completed") => ({
  schema_version, message_type, message_id: "m", idempotency_key: "k", correlation_id: "c",
  tenant_id: "t", subject: "s", source: "x", created_at: "2026-11-22T00:00:00Z"
})

describe("MessageDefinition", () => {
  it("upcasts every older version to the latest, step by step", () => {
    expect(Completed.latestVersion).toBe(3)
    expect(Result.getOrThrow(Completed.decode(1, { call_id: "c1", duration_s: 2 }))).toEqual({ call_id: "c1", duration_ms: 2000, currency: "USD" })
    expect(Result.getOrThrow(Completed.decode(2, { call_id: "c1", duration_s: 2, currency: "EUR" }))).toEqual({ call_id: "c1", duration_ms: 2000, currency: "EUR" })
  })

  it("decodes strictly and names every bad field", () => {
    const r = Completed.decode(2, { call_id: 5, currency: "EUR", extra: true })
    expect(Result.isFailure(r) && r.failure._tag === "InvalidPayload" && r.failure.problems.map((p) => p.path).sort()).toEqual([
      "payload.call_id", "payload.duration_s", "payload.extra"
    ])
  })

  it("refuses versions out of order or without an upcaster", () => {
    expect(() => MessageDefinition.event("a.b").version(2, V1 as never)).toThrow(/in order/)
    expect(() => (MessageDefinition.event("a.b").version(1, V1) as any).version(2, V2)).toThrow(/needs an upcaster/)
    expect(() => MessageDefinition.event("NotDotted")).toThrow(/dotted/)
  })
})

describe("Router", () => {
  it("rejects two handlers for one message type at startup", () => {
    expect(() => Router.make([
      Module.make("a", { handlers: [handler("first")] }),
      Module.make("b", { handlers: [handler("second")] })
    ])).toThrow(/two handlers for message type "call.completed": "first" \(module a\) and "second" \(module b\)/)
  })

  it("rejects one handler name used twice (fact ids depend on it)", () => {
    const other = MessageDefinition.event("call.other").version(1, V1)
    expect(() => Router.make([Module.make("a", {
      handlers: [handler("same"), Handler.handler(other, { name: "same", handle: () => Effect.succeed([]) })]
    })])).toThrow(/used twice/)
  })

  it("routes by message_type and says why a message cannot be routed", () => {
    const router = Router.make([Module.make("calls", { handlers: [handler("h")] })])
    const ok = router.route(envelope(1), { call_id: "c", duration_s: 1 })
    expect(Result.isSuccess(ok) && ok.success.message.payload).toEqual({ call_id: "c", duration_ms: 1000, currency: "USD" })
    const unknown = router.route(envelope(1, "call.unknown"), {})
    expect(Result.isFailure(unknown) && unknown.failure.reason).toBe("unknown_message_type")
    const tooNew = router.route(envelope(4), {})
    expect(Result.isFailure(tooNew) && tooNew.failure.reason).toBe("unsupported_version")
    const bad = router.route(envelope(3), { call_id: "c" })
    expect(Result.isFailure(bad) && bad.failure.reason).toBe("decode_error")
  })
})
