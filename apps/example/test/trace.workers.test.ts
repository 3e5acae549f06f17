/** GET /v1/facts/:fact_id/trace: the causation chain of a fact, back to the message and forward to what it caused. */
import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, readStream, request, tokenA, tokenB } from "./helpers.js"

const get = async (path: string, token = tokenA) => {
  const response = await request(path, { token })
  return { status: response.status, body: await response.json<any>() }
}

describe("fact trace", () => {
  it("walks back from a charge to the call.completed that caused it, and forward from the outcome to what it caused", async () => {
    const call = callCompleted()
    expect((await postEvents(call)).status).toBe(202)
    await drain()
    const [outcome, qualification, charge] = (await readStream("tenant-a", call.subject)).facts
    expect([outcome!.type, qualification!.type, charge!.type]).toEqual(["outcome", "qualification", "charge"])

    const back = await get(`/v1/facts/${charge!.fact_id}/trace?subject=${call.subject}`)
    expect(back.status).toBe(200)
    expect(back.body.back.map((f: any) => f.type)).toEqual(["outcome", "charge"])
    expect(back.body.cause).toEqual({
      idempotency_key: call.idempotency_key,
      message: { message_type: "call.completed", subject: call.subject, accepted_at: expect.any(String) }
    })
    expect(back.body.correlation_id).toBe(call.correlation_id)
    expect(back.body.forward).toEqual([])

    const forward = await get(`/v1/facts/${outcome!.fact_id}/trace?subject=${call.subject}`)
    expect(forward.body.back.map((f: any) => f.fact_id)).toEqual([outcome!.fact_id])
    expect(forward.body.forward.map((f: any) => [f.type, f.depth, f.causation_id])).toEqual([
      ["qualification", 1, outcome!.fact_id],
      ["charge", 1, outcome!.fact_id]
    ])

    // Tenant B, an unknown fact, and no subject.
    expect((await get(`/v1/facts/${charge!.fact_id}/trace?subject=${call.subject}`, tokenB)).status).toBe(404)
    expect((await get(`/v1/facts/f_unknown/trace?subject=${call.subject}`)).status).toBe(404)
    const missing = await get(`/v1/facts/${charge!.fact_id}/trace`)
    expect(missing.status).toBe(400)
    expect(missing.body.error.details.problems).toEqual([{ path: "subject", message: "is required" }])
  })
})
