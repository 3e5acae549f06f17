import { describe, expect, it } from "vitest"
import * as EndpointLimiter from "./EndpointLimiter.js"

const ask = (state: EndpointLimiter.State, limits: EndpointLimiter.Limits, ids: ReadonlyArray<string>, now: number) => EndpointLimiter.acquire(state, limits, ids, now)

describe("an endpoint's limiter", () => {
  it("grants at most max_per_second in any window of one second; the rest wait until the oldest grant leaves it, spread at the endpoint's pace", () => {
    const limits = { maxPerSecond: 2, maxInFlight: null }
    const first = ask(EndpointLimiter.empty(), limits, ["a", "b", "c", "d", "e"], 10_000)
    expect(first.grant.granted).toEqual(["a", "b"])
    expect(first.grant.waits).toEqual([{ id: "c", ms: 1_000 }, { id: "d", ms: 1_000 }, { id: "e", ms: 2_000 }])
    // 999 ms later the window still holds two grants; at 1,000 ms the first two have left it.
    expect(ask(first.state, limits, ["c"], 10_999).grant.granted).toEqual([])
    expect(ask(first.state, limits, ["c"], 10_999).grant.waits).toEqual([{ id: "c", ms: 1_000 }])
    const later = ask(first.state, limits, ["c", "d", "e"], 11_000)
    expect(later.grant.granted).toEqual(["c", "d"])
  })

  it("grants at most max_in_flight until released; a lease that is never released expires", () => {
    const limits = { maxPerSecond: null, maxInFlight: 1 }
    const first = ask(EndpointLimiter.empty(), limits, ["a", "b"], 0)
    expect(first.grant.granted).toEqual(["a"])
    expect(ask(first.state, limits, ["b"], 5_000).grant.granted).toEqual([])
    const released = EndpointLimiter.release(first.state, ["a"], 5_000)
    expect(ask(released, limits, ["b"], 5_000).grant.granted).toEqual(["b"])
    // "a"'s invocation died mid-POST: its slot comes back when the lease expires.
    expect(ask(first.state, limits, ["b"], EndpointLimiter.leaseMs - 1).grant.granted).toEqual([])
    expect(ask(first.state, limits, ["b"], EndpointLimiter.leaseMs).grant.granted).toEqual(["b"])
  })

  it("a redelivery of a delivery holding a lease replaces it instead of taking a second slot", () => {
    const limits = { maxPerSecond: null, maxInFlight: 1 }
    const first = ask(EndpointLimiter.empty(), limits, ["a"], 0)
    const again = ask(first.state, limits, ["a"], 2_000)
    expect(again.grant.granted).toEqual(["a"])
    expect(Object.keys(again.state.leases)).toEqual(["a"])
  })

  it("keeps the order asked: once one waits, the ones after it wait too", () => {
    const limits = { maxPerSecond: 1, maxInFlight: 1 }
    const held = ask(EndpointLimiter.empty(), limits, ["a"], 0)
    const next = ask(EndpointLimiter.release(held.state, ["a"], 100), limits, ["b", "c"], 100)
    expect(next.grant.granted).toEqual([])
    expect(next.grant.waits.map((w) => w.id)).toEqual(["b", "c"])
  })

  it("an endpoint without limits is never asked", () => {
    expect(EndpointLimiter.limits({ max_per_second: null, max_in_flight: null })).toBeUndefined()
    expect(EndpointLimiter.limits({ max_per_second: 5, max_in_flight: null })).toEqual({ maxPerSecond: 5, maxInFlight: null })
  })
})
