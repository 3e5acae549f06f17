/**
 * The hand-written request layer (`Requests` of @factline/client, which only the `factline` command still
 * calls the API through; `Client` and the dashboard use `Api`, derived from the description) against the
 * API's description: the OpenAPI document generated from the
 * endpoints (`http/Routes.ts`, the document GET /openapi.json serves). Each route the client calls must be
 * an operation of it under the same name — method, path, every query parameter, the body's media type, the
 * success status — and every field the client reads of a success must be one the document promises, of the
 * same type. Until the command moves onto `Api` (and this file and Requests.ts go), this is what keeps the
 * two from drifting: renaming a route, a parameter or a field fails here.
 */
import { Schema } from "effect"
import { OpenApi } from "effect/http-api"
import { describe, expect, it } from "vitest"
import { Requests } from "@factline/client"
import { api } from "./http/Routes.js"

type JsonSchema = Record<string, any>
const doc = OpenApi.fromApi(api) as unknown as { paths: Record<string, Record<string, any>>; components: { schemas: Record<string, JsonSchema> } }
const operation = (method: string, path: string) => doc.paths[path.replace(/:(\w+)/g, "{$1}")]?.[method.toLowerCase()]

const resolve = (schema: JsonSchema, definitions: Record<string, JsonSchema>): JsonSchema =>
  typeof schema.$ref === "string" ? resolve(definitions[schema.$ref.split("/").at(-1)!]!, definitions) : schema
/** The alternatives of a schema (its `anyOf` branches, or itself), without `null`. */
const branches = (schema: JsonSchema, definitions: Record<string, JsonSchema>): Array<JsonSchema> => {
  const s = resolve(schema, definitions)
  return (s.anyOf ?? s.oneOf ?? [s]).map((b: JsonSchema) => resolve(b, definitions)).filter((b: JsonSchema) => b.type !== "null")
}
const kind = (type: unknown): unknown => (type === "integer" ? "number" : type)

/**
 * Where the client's schema reads what the documented one does not promise: a required field the document
 * lacks or makes optional (in any branch of a union), or a value of another type.
 */
const unpromised = (client: JsonSchema, clientDefs: Record<string, JsonSchema>, documented: JsonSchema, at: string): Array<string> => {
  const wants = branches(client, clientDefs)
  const promised = branches(documented, doc.components.schemas)
  const containers = promised.flatMap((p) => wants.flatMap((want): Array<string> => {
    if (want.type === "array") return p.type === "array" ? unpromised(want.items ?? {}, clientDefs, p.items ?? {}, `${at}[]`) : [`${at}: an array, documented as ${p.type}`]
    if (want.type !== "object") return []
    return Object.keys(want.properties ?? {}).flatMap((name) => {
      const field = p.properties?.[name]
      // A field read as optional may be one branch's own (a rebuild's `projection`): promised when another branch documents it.
      if (field === undefined && !want.required?.includes(name) && promised.some((other) => other.properties?.[name] !== undefined)) return []
      if (field === undefined) return p.additionalProperties === false || p.additionalProperties === undefined ? [`${at}.${name}: not documented`] : []
      if (want.required?.includes(name) && !p.required?.includes(name)) return [`${at}.${name}: documented as optional`]
      return unpromised(want.properties[name], clientDefs, field, `${at}.${name}`)
    })
  }))
  // A leaf (a Schema.Number is `number`, or the strings "NaN" and "Infinity") matches when one of its types is documented.
  const leaves = wants.filter((w) => w.type !== undefined && w.type !== "array" && w.type !== "object").map((w) => kind(w.type))
  const types: Array<unknown> = promised.map((p) => kind(p.type)).filter((t) => t !== undefined)
  const mismatch = leaves.length > 0 && types.length > 0 && !leaves.some((t) => types.includes(t))
  return mismatch ? [...containers, `${at}: ${leaves[0]}, documented as ${types.join(" | ")}`] : containers
}

const routes = Object.entries(Requests.routes) as Array<[string, Requests.AnyRoute]>

describe("the client's request layer is the API's description", () => {
  it.each(routes)("%s: an operation of that name, method and path", (name, route) => {
    const op = operation(route.method, route.path)
    expect(op, `${route.method} ${route.path} is not in the description`).toBeDefined()
    expect(op.operationId.split(".").at(-1)).toBe(name)
  })

  it.each(routes)("%s: its query parameters are documented (and it takes others only where the description's query is open)", (_, route) => {
    const op = operation(route.method, route.path)
    const documented = (op.parameters ?? []).filter((p: any) => p.in === "query").map((p: any) => p.name)
    expect(documented).toEqual(expect.arrayContaining([...route.query]))
    const params = (op.parameters ?? []).filter((p: any) => p.in === "path").map((p: any) => p.name)
    expect(params.sort()).toEqual([...route.path.matchAll(/:(\w+)/g)].map((m) => m[1]).sort())
    if (!route.openQuery) expect(documented.filter((n: string) => !route.query.includes(n)).filter((n: string) => (op.parameters.find((p: any) => p.name === n).required))).toEqual([])
  })

  it.each(routes)("%s: its body's media type and its success status are documented", (_, route) => {
    const op = operation(route.method, route.path)
    if (route.body === undefined) expect(op.requestBody?.required ?? false).toBe(false)
    else expect(Object.keys(op.requestBody.content)).toContain(route.body.contentType)
    expect(Object.keys(op.responses)).toContain(String(route.success))
    expect(Object.keys(op.responses).filter((s) => s.startsWith("2"))).toEqual([String(route.success)])
  })

  it.each(routes.filter(([, r]) => r.reads !== "stream"))("%s: every field the client reads of a success is documented, of the same type", (_, route) => {
    const op = operation(route.method, route.path)
    const client = Schema.toJsonSchemaDocument(route.reads as Schema.Top)
    expect(unpromised(client.schema as JsonSchema, client.definitions as Record<string, JsonSchema>, op.responses[String(route.success)].content["application/json"].schema, "body")).toEqual([])
  })

  it("a field the description does not promise is found (the check can fail)", () => {
    const client = Schema.toJsonSchemaDocument(Schema.Struct({ data: Schema.Array(Schema.Struct({ id: Schema.String, colour: Schema.String, attempts: Schema.String })) }))
    const op = operation("GET", "/v1/dlq")
    expect(unpromised(client.schema as JsonSchema, client.definitions as Record<string, JsonSchema>, op.responses["200"].content["application/json"].schema, "body"))
      .toEqual(["body.data[].colour: not documented", "body.data[].attempts: string, documented as number"])
  })

  it("a field only some branches of a union document is promised when read as optional, never as required, and is still typed", () => {
    const op = operation("GET", "/v1/batches/:id")
    const read = (fields: Schema.Struct.Fields) => {
      const client = Schema.toJsonSchemaDocument(Schema.Struct(fields))
      return unpromised(client.schema as JsonSchema, client.definitions as Record<string, JsonSchema>, op.responses["200"].content["application/json"].schema, "body")
    }
    // `projection` is a rebuild's, `errors` an import's (BatchJob | RebuildJob).
    expect(read({ projection: Schema.optional(Schema.String), errors: Schema.optional(Schema.Array(Schema.Struct({ line: Schema.Number }))) })).toEqual([])
    expect(read({ projection: Schema.String })).toEqual(["body.projection: not documented"])
    expect(read({ errors: Schema.optional(Schema.Array(Schema.Struct({ line: Schema.String }))), colour: Schema.optional(Schema.String) }))
      .toEqual(["body.errors[].line: string, documented as number", "body.colour: not documented", "body.colour: not documented"])
  })
})
