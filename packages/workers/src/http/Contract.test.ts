import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiSchema } from "effect/http-api"
import { Hono } from "hono"
import { describe, expect, it } from "vitest"
import { Failure } from "@factline/core"
import { type AppEnv, bind, describe as described, problems, raw } from "./Contract.js"
import { respond } from "./Problem.js"

const created = HttpApiEndpoint.post("createThing", "/things", {
  success: Schema.Struct({ id: Schema.String, count: Schema.Int }).pipe(HttpApiSchema.status(201)),
  error: problems(400, 404)
}).pipe(described({ summary: "Create a thing", errors: { 400: "bad", 404: "missing" } }))

const listed = HttpApiEndpoint.get("listThings", "/things", {
  success: Schema.Struct({ data: Schema.Array(Schema.String) })
}).pipe(described({ summary: "List things" }))

const app = () => {
  const app = new Hono<AppEnv>()
  app.onError((error, c) => respond(c, error))
  return app
}

describe("bind: the description types and serves a route", () => {
  it("answers the documented body with the documented status", async () => {
    const a = app()
    bind(a, created, (_c, reply) => reply({ id: "t1", count: 2 }))
    const response = await a.request("/things", { method: "POST" })
    expect(response.status).toBe(201)
    expect(await response.json()).toEqual({ id: "t1", count: 2 })
  })

  it("sends headers beside the documented body, and a raw response as it is", async () => {
    const a = app()
    bind(a, listed, (_c, reply) => reply({ data: ["x"] }, { "x-trace": "1" }))
    bind(a, created, () => raw(new Response("plain", { status: 200 })))
    const typed = await a.request("/things")
    expect(typed.status).toBe(200)
    expect(typed.headers.get("x-trace")).toBe("1")
    expect(await typed.json()).toEqual({ data: ["x"] })
    expect(await (await a.request("/things", { method: "POST" })).text()).toBe("plain")
  })

  it("answers a thrown family failure from its class, never a status picked at the call site", async () => {
    const a = app()
    bind(a, created, () => {
      throw new Failure.NotFound({ message: "no thing" })
    })
    const response = await a.request("/things", { method: "POST" })
    expect(response.status).toBe(404)
    expect(await response.json()).toEqual({ error: { code: "not_found", message: "no thing" } })
  })

  it("a handler answering a shape its endpoint does not document does not compile", () => {
    const a = app()
    // Each line below is a type error: `npm run typecheck` fails if one of them starts to compile.
    // @ts-expect-error: `extra` is not a field of the documented success
    bind(a, created, (_c, reply) => reply({ id: "t1", count: 2, extra: true }))
    // @ts-expect-error: `count` is documented as a number
    bind(a, created, (_c, reply) => reply({ id: "t1", count: "2" }))
    // @ts-expect-error: `count` is missing
    bind(a, created, (_c, reply) => reply({ id: "t1" }))
    // @ts-expect-error: a body not passed through `reply` is no answer
    bind(a, created, () => ({ id: "t1", count: 2 }))
    // @ts-expect-error: a Response built by hand is no answer unless it is named `raw`
    bind(a, listed, (c) => c.json({ data: ["x"] }))
    expect(true).toBe(true)
  })
})
