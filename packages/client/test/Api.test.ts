/**
 * The client derived from the API's description (`Api.make`): each call is encoded and decoded by its
 * endpoint's schemas, carries the token, is retried with the identical body, and fails with a typed error.
 * The platform is a recording `fetch` here (the Worker itself is apps/example's client.workers.test.ts).
 * And the derivation's point: a schema that changes changes the client's types, with no other edit.
 */
import * as Schema from "effect/Schema"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import { DeadLetters } from "@factline/core/api"
import { describe, expect, expectTypeOf, it } from "vitest"
import { Api, Conflict, InvalidQuery, InvalidRequest, Unavailable } from "../src/index.js"

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } })

const recording = (answers: Array<() => Response>) => {
  const sent: Array<{ url: string; method: string; authorization: string | null; body: string | undefined }> = []
  const fetch = async (url: string, init: RequestInit) => {
    const headers = new Headers(init.headers)
    sent.push({ url, method: init.method ?? "GET", authorization: headers.get("authorization"), body: init.body === undefined || init.body === null ? undefined : new TextDecoder().decode(init.body as Uint8Array) })
    return answers.shift()!()
  }
  return { sent, fetch }
}

const detail = { id: "dl_1", queue: "factline-events", status: "skipped", reason: "permanent_failure", last_error: "x", attempts: 1, tenant_id: "t1", message_type: null, idempotency_key: null, subject: null, first_attempted_at: "a", last_attempted_at: "b", received_at: "c", resolved_by: "ops", resolved_at: "d", replay_operation_id: null, stack: null, original_message: {}, history: [] }

describe("the derived client", () => {
  it("sends the path, query and body its endpoint describes, with the token, and decodes the answer", async () => {
    const { sent, fetch } = recording([() => json(200, { data: [], next_cursor: null }), () => json(200, { ...detail, reconciliation_fact_id: "f1" })])
    const api = Api.make({ baseUrl: "https://factline.test/", token: "tok", fetch })
    expect(await api.deadLetters.listDeadLetters({ query: { queue: "factline-events", limit: "20" } })).toEqual({ data: [], next_cursor: null })
    const skipped = await api.deadLetters.skipDeadLetter({ params: { id: "dl 1" }, payload: { reason: "re-filed" } })
    expect(skipped.reconciliation_fact_id).toBe("f1")
    expect(sent.map(({ url, method, authorization }) => ({ url, method, authorization }))).toEqual([
      { url: "https://factline.test/v1/dlq?queue=factline-events&limit=20", method: "GET", authorization: "Bearer tok" },
      { url: "https://factline.test/v1/dlq/dl%201/skip", method: "POST", authorization: "Bearer tok" }
    ])
    expect(JSON.parse(sent[1]!.body!)).toEqual({ reason: "re-filed" })
  })

  it("retries a 503 with the identical request, and fails with Unavailable once the attempts are spent", async () => {
    const unavailable = () => json(503, { error: { code: "unavailable", message: "the store is unavailable" } }, { "retry-after": "0" })
    const { sent, fetch } = recording([unavailable, () => json(202, { operation_id: "op", count: 1, waves: 1, wave_size: 100, wave_delay_seconds: 0 }), unavailable, unavailable])
    const api = Api.make({ baseUrl: "https://factline.test", token: "tok", fetch, retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 1 } })
    expect((await api.deadLetters.replayDeadLetters({ query: {} })).operation_id).toBe("op")
    expect(sent[0]).toEqual(sent[1])
    await expect(api.deadLetters.replayDeadLetters({ query: {} })).rejects.toBeInstanceOf(Unavailable)
    expect(sent).toHaveLength(4)
  })

  it("fails with the typed error of the API's answer: a declared 409 and 400, an undeclared 403", async () => {
    const { fetch } = recording([
      () => json(409, { error: { code: "conflict", message: "already skipped" } }),
      () => json(400, { error: { code: "invalid_request", message: "reason: is required", details: { problems: [{ path: "reason", message: "is required" }] } } }),
      () => json(403, { error: { code: "forbidden", message: "the token holds none of the scopes admin, platform" } })
    ])
    const api = Api.make({ baseUrl: "https://factline.test", token: "tok", fetch, retry: { maxAttempts: 1 } })
    await expect(api.deadLetters.replayDeadLetter({ params: { id: "dl_1" } })).rejects.toBeInstanceOf(Conflict)
    const refused = await api.deadLetters.skipDeadLetter({ params: { id: "dl_1" }, payload: { reason: "x" } }).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(InvalidRequest)
    expect((refused as InvalidRequest).problems).toEqual([{ path: "reason", message: "is required" }])
    await expect(api.deadLetters.getDeadLetter({ params: { id: "dl_1" } })).rejects.toMatchObject({ _tag: "Forbidden", status: 403 })
  })

  it("refuses a request its endpoint's schemas refuse before sending anything: InvalidRequest (InvalidQuery for a GET) with the problems", async () => {
    const { sent, fetch } = recording([])
    const api = Api.make({ baseUrl: "https://factline.test", token: "tok", fetch })
    const blank = await api.deadLetters.skipDeadLetter({ params: { id: "dl_1" }, payload: { reason: "" } }).catch((e: unknown) => e)
    expect(blank).toBeInstanceOf(InvalidRequest)
    expect(blank).toMatchObject({ status: 0, problems: [{ path: "reason", message: expect.stringContaining("is required") }] })
    expect((blank as InvalidRequest).message).toContain("nothing was sent")
    const badLimit = await api.deadLetters.listDeadLetters({ query: { limit: "many" } }).catch((e: unknown) => e)
    expect(badLimit).toBeInstanceOf(InvalidQuery)
    expect((badLimit as InvalidQuery).problems.map((p) => p.path)).toEqual(["limit"])
    expect(sent).toHaveLength(0)
  })

  it("an answer its endpoint's schema does not read is UnexpectedResponse, not a refusal of the request", async () => {
    const { sent, fetch } = recording([() => json(200, { data: "not a list" })])
    const api = Api.make({ baseUrl: "https://factline.test", token: "tok", fetch })
    await expect(api.deadLetters.listDeadLetters({ query: {} })).rejects.toMatchObject({ _tag: "UnexpectedResponse", status: 200 })
    expect(sent).toHaveLength(1)
  })

  it("is typed by the description: a payload that gains a required field makes the old call a type error", () => {
    // The endpoint as described, and the same endpoint after a schema change (a required `ticket`).
    const described = DeadLetters.skip
    const changed = HttpApiEndpoint.post("skipDeadLetter", "/v1/dlq/:id/skip", {
      params: { id: Schema.String },
      payload: Schema.Struct({ reason: Schema.String, ticket: Schema.String }),
      success: Schema.Struct({ reconciliation_fact_id: Schema.String })
    })
    const call = { params: { id: "dl_1" }, payload: { reason: "re-filed" } }
    const ok: Api.Input<typeof described> = call
    // @ts-expect-error the changed schema requires `ticket`: the client's input type changed with it
    const refused: Api.Input<typeof changed> = call
    expectTypeOf<Api.Input<typeof changed>["payload"]>().toEqualTypeOf<{ readonly reason: string; readonly ticket: string }>()
    expectTypeOf<Api.Api["deadLetters"]["skipDeadLetter"]>().toEqualTypeOf<Api.Call<typeof described>>()
    expect([ok, refused]).toHaveLength(2)
  })
})

describe("the derived client's workflows calls", () => {
  const instance = { instance_id: "crm-sync-0a1b", tenant_id: "t1", workflow: "crm-sync", subject: "call-1", start_fact_id: "f_1", status: "failed", step: "create-deal", attempts: 1, waiting_for: null, wait_until: null, facts: ["f_2"], error: "deal refused: 422", traceparent: null, started_at: "a", updated_at: "b" }
  const detail = { ...instance, status: "queued", error: null, cloudflare: { status: "queued", error: null }, appended: [] }

  it("lists with the filters as query, retries (202, decoded) and reads Cloudflare's refusal of a terminate as Conflict", async () => {
    const { sent, fetch } = recording([
      () => json(200, { data: [instance], next_cursor: null }),
      () => json(202, detail),
      () => json(409, { error: { code: "workflow_refused", message: "Cloudflare refused to terminate workflow instance crm-sync-0a1b: instance.cannot_terminate" } })
    ])
    const api = Api.make({ baseUrl: "https://factline.test", token: "tok", fetch, retry: { maxAttempts: 1 } })
    const page = await api.workflows.listWorkflows({ query: { workflow: "crm-sync", status: "failed", limit: "10" } })
    expect(page.data[0]?.step).toBe("create-deal")
    const retried = await api.workflows.retryWorkflow({ params: { id: "crm-sync-0a1b" } })
    expect(retried.cloudflare?.status).toBe("queued")
    const refused = await api.workflows.terminateWorkflow({ params: { id: "crm-sync-0a1b" } }).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(Conflict)
    expect(sent.map(({ url, method }) => `${method} ${url}`)).toEqual([
      "GET https://factline.test/v1/workflows?workflow=crm-sync&status=failed&limit=10",
      "POST https://factline.test/v1/workflows/crm-sync-0a1b/retry",
      "POST https://factline.test/v1/workflows/crm-sync-0a1b/terminate"
    ])
  })

  it("refuses a status the description does not list before sending", async () => {
    const { sent, fetch } = recording([])
    const api = Api.make({ baseUrl: "https://factline.test", token: "tok", fetch })
    // @ts-expect-error — not a status of an instance
    const bad = await api.workflows.listWorkflows({ query: { status: "sleepy" } }).catch((e: unknown) => e)
    expect(bad).toBeInstanceOf(InvalidQuery)
    expect((bad as InvalidQuery).problems.map((p) => p.path)).toEqual(["status"])
    expect(sent).toHaveLength(0)
  })
})
