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

    // Tenant B, an unknown fact.
    expect((await get(`/v1/facts/${charge!.fact_id}/trace?subject=${call.subject}`, tokenB)).status).toBe(404)
    expect((await get(`/v1/facts/f_unknown/trace?subject=${call.subject}`)).status).toBe(404)
  })

  it("a fact id alone is enough (issue 21, defect 9): the tenant's shards find its stream; an unknown id or another tenant's fact is a 404", async () => {
    const call = callCompleted()
    expect((await postEvents(call)).status).toBe(202)
    await drain()
    const [outcome, , charge] = (await readStream("tenant-a", call.subject)).facts
    const withSubject = await get(`/v1/facts/${charge!.fact_id}/trace?subject=${call.subject}`)
    const alone = await get(`/v1/facts/${charge!.fact_id}/trace`)
    expect(alone.status).toBe(200)
    expect(alone.body).toEqual(withSubject.body)
    expect(alone.body.subject).toBe(call.subject)
    expect(alone.body.back.map((f: any) => f.fact_id)).toEqual([outcome!.fact_id, charge!.fact_id])
    expect(alone.body.cause.idempotency_key).toBe(call.idempotency_key)

    const unknown = await get("/v1/facts/f_unknown/trace")
    expect(unknown.status).toBe(404)
    expect(unknown.body.error.code).toBe("not_found")
    // Tenant B's own fact, asked for by tenant A (and A's by B): not found, nothing of the other tenant shown.
    const other = callCompleted({ tenant_id: "tenant-b" })
    expect((await postEvents(other, tokenB)).status).toBe(202)
    await drain()
    const [bOutcome] = (await readStream("tenant-b", other.subject)).facts
    expect((await get(`/v1/facts/${bOutcome!.fact_id}/trace`, tokenB)).status).toBe(200)
    const crossed = await get(`/v1/facts/${bOutcome!.fact_id}/trace`)
    expect(crossed.status).toBe(404)
    expect(JSON.stringify(crossed.body)).not.toContain(other.subject)
    expect((await get(`/v1/facts/${charge!.fact_id}/trace`, tokenB)).status).toBe(404)
    // An empty subject is a 400 (leave it out to find the fact by its id).
    const empty = await get(`/v1/facts/${charge!.fact_id}/trace?subject=`)
    expect(empty.status).toBe(400)
    expect(empty.body.error.details.problems).toEqual([{ path: "subject", message: "must not be empty" }])
  })
})
