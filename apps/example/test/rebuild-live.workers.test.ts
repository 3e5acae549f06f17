/**
 * A rebuild during live traffic converges (issue 8, fault suite, fast variant):
 * while `buyer_budgets` is rebuilt — in two slices, so facts arrive between
 * tenant-a's replay and the swap — calls and replays keep arriving over HTTP,
 * then disputes; afterwards `buyer_budgets` and `calls` hold exactly the rows
 * live traffic alone gives. It fails when the live consumer stops writing to a
 * running rebuild's shadow. The heavier variant (which also rebuilds `calls`
 * during the disputes) runs in `npm run chaos`.
 */
import { describe, expect, it } from "vitest"
import * as FaultCases from "./faultCases.js"

describe("rebuild during live traffic", () => {
  it("buyer_budgets rebuilt while calls and replays arrive: the same rows as without a rebuild", async () => {
    const { card, budgets, expectedBudgets, rows, expectedRows } = await FaultCases.rebuildUnderLiveTraffic({ calls: 36, perPost: 3, paceMs: 1_500, rebuildCalls: false })
    expect(card.posts_during_rebuild).toBeGreaterThan(0)
    expect(budgets).toEqual(expectedBudgets)
    expect(rows).toEqual(expectedRows)
    expect(card).toMatchObject({ facts_found: card.facts_expected, duplicates_found: 0, dlq_found: 0 })
    expect(card.passed, JSON.stringify(card)).toBe(true)
  }, 600_000)
})
