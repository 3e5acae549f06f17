/**
 * The operators' routes over workflow instances (`GET /v1/workflows`, `GET /v1/workflows/:id`, `POST
 * /v1/workflows/:id/terminate|retry`) on real crm-sync instances of the real local Workflows binding: an
 * instance is listed and shown with Cloudflare's own status, its step and the facts it appended; one terminated
 * while it waits for the call's dispute is terminated at Cloudflare and in the index, and cannot be terminated
 * twice (409); a failed one retried runs again and completes, each CRM call still once per step's key; another
 * tenant sees none of them (404); a bad query is a 400 naming the parameter.
 */
import { env } from "cloudflare:workers"
import { describe, expect, it } from "vitest"
import { drain } from "./Drain.js"
import { callCompleted, postEvents, request, tokenA, tokenAReadOnly, tokenB, tokenPlatform } from "./helpers.js"

interface Instance {
  readonly instance_id: string
  readonly tenant_id: string
  readonly workflow: string
  readonly subject: string
  readonly status: string
  readonly step: string | null
  readonly attempts: number
  readonly waiting_for: string | null
  readonly wait_until: string | null
  readonly facts: ReadonlyArray<string>
  readonly error: string | null
}
interface Detail extends Instance {
  readonly cloudflare: { readonly status: string; readonly error: string | null; readonly output?: unknown } | null
  readonly appended: ReadonlyArray<{ readonly fact_id: string; readonly type: string; readonly subject: string; readonly data: Record<string, unknown> }>
}
interface CrmState {
  readonly requests: ReadonlyArray<{ readonly operation: string; readonly key: string | null; readonly status: number }>
  readonly effects: ReadonlyArray<{ readonly operation: string; readonly key: string }>
}

const crm = (path: string, init?: RequestInit) => fetch(`${env.CRM_URL}${path}`, init)
const crmState = async (callId: string) => (await crm(`/state?call_id=${encodeURIComponent(callId)}`)).json() as Promise<CrmState>

/** A qualified call (120 s) of tenant-a: its crm-sync instance starts once the queues are drained. */
const start = async (callId: string) => {
  const accepted = await postEvents({ events: [callCompleted({ idempotency_key: `completed-${callId}` }, { call_id: callId, buyer_id: "buyer-ops", duration_s: 120, price_cents: 450, currency: "USD" })] })
  expect(accepted.status, await accepted.clone().text()).toBe(202)
}

const get = async <T>(path: string, token = tokenA) => {
  const response = await request(path, { token })
  return { status: response.status, body: await response.json() as T }
}
const post = async <T>(path: string, token = tokenA) => {
  const response = await request(path, { method: "POST", token })
  return { status: response.status, body: await response.json() as T }
}

/** The instance of the call, listed by its subject, once it is recorded. */
const listed = async (callId: string, token = tokenA) => {
  const { status, body } = await get<{ data: ReadonlyArray<Instance>; next_cursor: string | null }>(`/v1/workflows?workflow=crm-sync&subject=${encodeURIComponent(callId)}`, token)
  expect(status).toBe(200)
  return body.data
}

/** Polls GET /v1/workflows/:id (draining the queues) until `done` holds. */
const until = async (id: string, done: (d: Detail) => boolean, label: string, timeoutMs = 40_000) => {
  const deadline = Date.now() + timeoutMs
  let last: Detail | undefined
  while (Date.now() < deadline) {
    await drain()
    const { status, body } = await get<Detail>(`/v1/workflows/${id}`)
    if (status === 200) {
      last = body
      if (done(body)) return body
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error(`${label} not reached within ${timeoutMs} ms: ${JSON.stringify(last)}`)
}

/** The call's instance id, once the start fact has started it. */
const instanceOf = async (callId: string) => {
  await start(callId)
  const deadline = Date.now() + 20_000
  while (Date.now() < deadline) {
    await drain()
    const [instance] = await listed(callId)
    if (instance !== undefined) return instance.instance_id
  }
  throw new Error(`no crm-sync instance for ${callId}`)
}

describe("workflows API", () => {
  it("lists and shows an instance: its status, step and attempts, Cloudflare's status and the facts it appended", async () => {
    const callId = `wf-show-${crypto.randomUUID()}`
    const id = await instanceOf(callId)
    const [row] = await listed(callId)
    expect(row).toMatchObject({ instance_id: id, tenant_id: "tenant-a", workflow: "crm-sync", subject: callId })
    // While it waits for the call's dispute: the wait, until when, and Cloudflare's own view (running locally).
    const waiting = await until(id, (d) => d.status === "waiting", "waiting for the dispute")
    expect(waiting.step).toBe("wait/dispute")
    expect(waiting.waiting_for).toContain("dispute")
    expect(Date.parse(waiting.wait_until ?? "")).toBeGreaterThan(Date.now())
    expect(waiting.attempts).toBeGreaterThanOrEqual(1)
    expect(waiting.cloudflare?.status).toBe("running")
    const done = await until(id, (d) => d.status === "complete" && d.cloudflare?.status === "complete", "complete")
    expect(done.error).toBeNull()
    expect(done.facts).toHaveLength(1)
    expect(done.appended.map((f) => [f.fact_id, f.type, f.subject])).toEqual([[done.facts[0], "crm_synced", callId]])
    expect(done.appended[0]!.data.note).toBe("qualified call, no dispute")
    // The status filter finds it among the complete ones, and not among the failed.
    const complete = await get<{ data: ReadonlyArray<Instance> }>(`/v1/workflows?status=complete&subject=${encodeURIComponent(callId)}`)
    expect(complete.body.data.map((i) => i.instance_id)).toEqual([id])
    expect((await get<{ data: ReadonlyArray<Instance> }>(`/v1/workflows?status=failed&subject=${encodeURIComponent(callId)}`)).body.data).toEqual([])
    // A complete instance is not retried, nor terminated.
    const retried = await post<{ error: { code: string } }>(`/v1/workflows/${id}/retry`)
    expect([retried.status, retried.body.error.code]).toEqual([409, "workflow_complete"])
    const terminated = await post<{ error: { code: string; message: string } }>(`/v1/workflows/${id}/terminate`)
    expect([terminated.status, terminated.body.error.code]).toEqual([409, "workflow_refused"])
    expect(terminated.body.error.message).toContain("instance.cannot_terminate")
  })

  it("terminates an instance while it waits for the dispute: terminated at Cloudflare and in the index, no note attached; a second terminate is a 409", async () => {
    const callId = `wf-terminate-${crypto.randomUUID()}`
    const id = await instanceOf(callId)
    await until(id, (d) => d.status === "waiting", "waiting for the dispute")
    const terminated = await post<Detail>(`/v1/workflows/${id}/terminate`)
    expect(terminated.status, JSON.stringify(terminated.body)).toBe(200)
    expect(terminated.body).toMatchObject({ instance_id: id, status: "terminated", waiting_for: null, wait_until: null })
    expect(terminated.body.cloudflare?.status).toBe("terminated")
    // Past the dispute window (6 s in tests): still terminated in both places, and the note was never attached.
    await new Promise((resolve) => setTimeout(resolve, 7_000))
    await drain()
    const after = await get<Detail>(`/v1/workflows/${id}`)
    expect([after.body.status, after.body.cloudflare?.status]).toEqual(["terminated", "terminated"])
    expect(after.body.facts).toEqual([])
    expect((await crmState(callId)).effects.map((e) => e.operation)).toEqual(["contacts", "deals"])
    const again = await post<{ error: { code: string; message: string } }>(`/v1/workflows/${id}/terminate`)
    expect([again.status, again.body.error.code]).toEqual([409, "workflow_refused"])
    expect(again.body.error.message).toContain("instance.cannot_terminate")
    // The platform scope lists it among every tenant's terminated instances.
    const platform = await get<{ data: ReadonlyArray<Instance> }>(`/v1/workflows?status=terminated&subject=${encodeURIComponent(callId)}`, tokenPlatform)
    expect(platform.body.data.map((i) => [i.instance_id, i.tenant_id])).toEqual([[id, "tenant-a"]])
  })

  it("retries a failed instance: it runs again and completes, each CRM call once per step's key", async () => {
    const callId = `wf-retry-${crypto.randomUUID()}`
    // The CRM refuses the deal once, for good (422): the instance compensates and fails.
    await crm("/control", { method: "POST", body: JSON.stringify({ call_id: callId, operation: "deals", status: 422, times: 1 }) })
    const id = await instanceOf(callId)
    const failed = await until(id, (d) => d.status === "failed" && d.cloudflare?.status === "errored", "failed")
    expect(failed.error).toContain("422")
    expect(failed.cloudflare?.error).toContain("422")
    expect(failed.appended.map((f) => f.type)).toEqual(["crm_sync_failed"])
    const retried = await post<Detail>(`/v1/workflows/${id}/retry`)
    expect(retried.status, JSON.stringify(retried.body)).toBe(202)
    expect(retried.body.error).toBeNull()
    const done = await until(id, (d) => d.status === "complete" && d.cloudflare?.status === "complete", "complete after the retry")
    expect(done.appended.map((f) => f.type)).toEqual(["crm_sync_failed", "crm_synced"])
    const state = await crmState(callId)
    // The deal refused once then made once; every operation's requests carried one key (a contact made again is the same one).
    expect(state.requests.filter((r) => r.operation === "deals").map((r) => r.status)).toEqual([422, 201])
    for (const operation of ["contacts", "deals", "notes"]) {
      expect(new Set(state.effects.filter((e) => e.operation === operation).map((e) => e.key)).size, operation).toBe(1)
    }
  })

  it("another tenant's instance is not found, listed or operated; the platform scope sees it; a read token is refused", async () => {
    const callId = `wf-tenant-${crypto.randomUUID()}`
    const id = await instanceOf(callId)
    expect(await listed(callId, tokenB)).toEqual([])
    for (const [method, path] of [["GET", `/v1/workflows/${id}`], ["POST", `/v1/workflows/${id}/terminate`], ["POST", `/v1/workflows/${id}/retry`]] as const) {
      const response = await request(path, { method, token: tokenB })
      expect(response.status, `${method} ${path}`).toBe(404)
      expect((await response.json() as { error: { code: string } }).error.code).toBe("not_found")
    }
    expect((await get<Detail>(`/v1/workflows/${id}`, tokenPlatform)).body.tenant_id).toBe("tenant-a")
    expect((await request("/v1/workflows", { token: tokenAReadOnly })).status).toBe(403)
    expect((await get<{ error: { code: string } }>("/v1/workflows/wf-unknown")).status).toBe(404)
    // Still running for tenant-a: nothing tenant-b tried stopped it.
    expect((await get<Detail>(`/v1/workflows/${id}`)).body.status).not.toBe("terminated")
  })

  it("a bad query is a 400 naming the parameter", async () => {
    for (const [query, path] of [["status=sleepy", "status"], ["limit=0", "limit"], ["cursor=nope", "cursor"], ["colour=red", "colour"]] as const) {
      const response = await request(`/v1/workflows?${query}`, { token: tokenA })
      const body = await response.json() as { error: { code: string; message: string } }
      expect(response.status, query).toBe(400)
      expect(body.error.code, query).toBe("invalid_query")
      expect(body.error.message, query).toContain(path)
    }
  })
})
