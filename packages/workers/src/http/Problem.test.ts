import Ajv2020 from "ajv/dist/2020.js"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { describe, expect, it } from "vitest"
import { Failure } from "@factline/core"
import { Validator } from "@seriousme/openapi-schema-validator"
import { problems } from "./Contract.js"
import { answerFor, Forbidden } from "./Problem.js"

const endpoint = HttpApiEndpoint.post("refuse", "/refuse", { error: problems(400) })
const doc = OpenApi.fromApi(HttpApi.make("t").add(HttpApiGroup.make("g").add(endpoint)))

/** What the edge writes for `error` (`answerFor`), and whether the description's `Problem` accepts it (what contract.mjs checks against the running Worker). */
const written = async (error: unknown) => {
  const answer = answerFor(error)
  const response = { status: answer.status }
  const text = JSON.stringify(answer.body)
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false })
  const valid = ajv.compile({ ...(doc.components.schemas as any).Problem, components: doc.components })
  const body = JSON.parse(text)
  return { status: response.status, size: text.length, body, valid: valid(body), errors: valid.errors }
}

const many = (n: number) => Array.from({ length: n }, (_, i) => ({ path: `payload.k${i}`, message: "unexpected" }))

describe("answerFor: problem lists are capped, and the description says so", () => {
  it("the OpenAPI document stays valid and documents problems_total", async () => {
    const validation = await new Validator().validate(structuredClone(doc) as any)
    expect(validation.valid, JSON.stringify(validation.errors)).toBe(true)
    expect(JSON.stringify((doc.components.schemas as any).Problem)).toContain("problems_total")
    // The check below is not vacuous: a body the description does not allow is refused.
    const ajv = new Ajv2020({ strict: false, validateFormats: false })
    const valid = ajv.compile({ ...(doc.components.schemas as any).Problem, components: doc.components })
    expect(valid({ error: { code: "x", message: "y", details: { problems: [], problems_total: "many" } } })).toBe(false)
    expect(valid({ error: { code: "x", message: "y", details: { problems: [{ path: 1 }] } } })).toBe(false)
  })

  it("150,000 problems: the first 100 and problems_total, a small body the description accepts", async () => {
    const { status, size, body, valid, errors } = await written(new Failure.InvalidInput({ code: "invalid_events", message: "150000 problem(s); the first 100 are listed", problems: many(150_000) }))
    expect(status).toBe(400)
    expect(valid, JSON.stringify(errors)).toBe(true)
    expect(body.error.details.problems).toEqual(many(100))
    expect(body.error.details.problems_total).toBe(150_000)
    expect(size).toBeLessThan(16 * 1024)
  })

  it("every details shape the family writes passes: few problems, a list, an object of its own, a 403's problems", async () => {
    for (const error of [
      new Failure.InvalidInput({ message: "one", problems: many(1) }),
      new Failure.InvalidInput({ message: "none" }),
      new Failure.Conflict({ message: "list", details: [{ idempotency_key: "k", reason: "accepted_before", paths: ["idempotency_key"] }] }),
      new Failure.Conflict({ message: "object", details: { sent: ["a"], not_sent: ["b"] } }),
      new Forbidden({ message: "events for another tenant", problems: many(1_000) })
    ]) {
      const { valid, errors, body } = await written(error)
      expect(valid, `${error.message}: ${JSON.stringify(errors)}`).toBe(true)
      if (body.error.details?.problems) expect(body.error.details.problems.length).toBeLessThanOrEqual(100)
    }
  })
})
