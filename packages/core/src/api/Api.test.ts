/**
 * The description (`@factline/core/api`) imports nothing of the runtime, so that a browser bundle can carry
 * it. The runtime reads the values it shares from the description (run outcomes, dead-letter and job statuses,
 * alert types, webhook limits, the dead letter's row); the queue names and the projection page limit, whose
 * source is the runtime's, are written in both and held together here.
 */
import * as HttpApi from "effect/http-api/HttpApi"
import { describe, expect, it } from "vitest"
import * as BatchJobs from "../batch/BatchJobs.js"
import * as RetryPolicy from "../consuming/RetryPolicy.js"
import * as Runs from "../consuming/Runs.js"
import * as Alerts from "../operations/Alerts.js"
import * as DeadLetterStore from "../operations/DeadLetterStore.js"
import * as ProjectionQuery from "../projections/ProjectionQuery.js"
import * as WebhookStore from "../webhooks/WebhookStore.js"
import * as WorkflowRecords from "../workflows/WorkflowRecords.js"
import { api, Batches, Contract, DeadLetters, Projections, Runs as RunsApi, Webhooks, Alerts as AlertsApi, Workflows as WorkflowsApi } from "./index.js"

describe("the API's description", () => {
  it("names the runtime's queues, outcomes, statuses, alert types and limits", () => {
    expect(Contract.queueNames).toEqual(RetryPolicy.all.map((p) => p.queue))
    expect(RunsApi.outcomes).toEqual(Runs.outcomes)
    expect(DeadLetters.statuses).toEqual(DeadLetterStore.statuses)
    expect(WorkflowsApi.statuses).toEqual(WorkflowRecords.statuses)
    expect(Batches.jobStatuses).toEqual(BatchJobs.statuses)
    expect(AlertsApi.eventTypes).toEqual(Alerts.eventTypes)
    expect(Projections.pageLimit).toEqual(ProjectionQuery.pageLimit)
    expect({ maxTypes: Webhooks.maxTypes, maxDescription: Webhooks.maxDescription, maxRateLimit: Webhooks.maxRateLimit })
      .toEqual({ maxTypes: WebhookStore.maxTypes, maxDescription: WebhookStore.maxDescription, maxRateLimit: WebhookStore.maxRateLimit })
  })

  it("holds every group, each endpoint once", () => {
    const groups = new Set<string>()
    const endpoints: Array<string> = []
    HttpApi.reflect(api, { onGroup: ({ group }) => void groups.add(group.identifier), onEndpoint: ({ endpoint }) => void endpoints.push(`${endpoint.method} ${endpoint.path}`) })
    expect([...groups].sort()).toEqual(["alerts", "batches", "deadLetters", "documents", "events", "facts", "health", "projections", "queues", "recovery", "runs", "subjects", "tenants", "webhooks", "workflows"])
    expect(new Set(endpoints).size).toBe(endpoints.length)
    expect(endpoints.length).toBeGreaterThanOrEqual(51)
  })
})
