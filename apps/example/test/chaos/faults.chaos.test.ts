/**
 * The heavier fault cases of issue 8's suite (`npm run chaos`), sharing their runners with the fast
 * tests (test/faultCases.ts): transient binding faults in each consumer stage at larger sizes, a
 * rebuild of both projections during live traffic, and a D1 outage of hours under the dead-letter
 * consumers. Each prints a `SCORECARD` line and asserts `passed`.
 */
import { describe, expect, it } from "vitest"
import * as FaultCases from "../faultCases.js"

describe("chaos: transient faults and rebuilds under traffic", () => {
  it("transient faults, events stage: 600 events (150 delivered twice), D1 every 7th call, LedgerShard every 11th, queues every 5th", async () => {
    const { card } = await FaultCases.transientEventsStage({ events: 600, batchSize: 50, schedule: { d1: 7, durableObjects: 11, queues: 5, lostReplies: true } })
    FaultCases.print(card)
    expect(card.passed).toBe(true)
  })

  it("transient faults, fact-processing stage: 400 outcomes, LedgerShard every 5th call, queues every 3rd, D1 every 7th", async () => {
    const { card } = await FaultCases.transientProcessingStage({ outcomes: 400, batchSize: 10, schedule: { d1: 7, durableObjects: 5, queues: 3, lostReplies: true } })
    FaultCases.print(card)
    expect(card.passed).toBe(true)
  })

  it("transient faults, projections stage: 400 call lives, D1 every 3rd call", async () => {
    const { card } = await FaultCases.transientProjectionsStage({ calls: 400, batchSize: 25, schedule: { d1: 3, lostReplies: true } })
    FaultCases.print(card)
    expect(card.passed).toBe(true)
  })

  it("rebuild during live traffic: 300 calls, replays and disputes while buyer_budgets and calls are rebuilt", async () => {
    const { card } = await FaultCases.rebuildUnderLiveTraffic({ calls: 300, perPost: 10, paceMs: 1_000, rebuildCalls: true })
    FaultCases.print(card)
    expect(card.passed).toBe(true)
  })

  it("long D1 outage under the DLQ consumers: 300 dead letters over 3 DLQs arriving through a 6-hour outage, R2 refusing puts for its first 40 min, a recovery run dying between insert and delete", async () => {
    const { card } = await FaultCases.longD1Outage({ deadLetters: 300, outageHours: 6, r2DownMinutes: 40, arrivalMinutes: 380, batchSize: 25 })
    FaultCases.print(card)
    expect(card.passed).toBe(true)
  })
})
