/**
 * Per-tenant rate limits at the HTTP edge (seed 000; docs/operating.md "Rate limits"): every authenticated request is
 * counted against its tenant's tier before its query or body is read. Over the limit it is answered 429
 * `rate_limited` with `Retry-After`, and nothing of it is read, accepted, enqueued or written.
 *
 * A tier is a Cloudflare Rate Limiting binding (`ratelimits` in wrangler config) — `default` is
 * `FACTLINE_RATE_LIMIT`, any other tier `x` is `FACTLINE_RATE_LIMIT_X`, `unlimited` counts nothing — keyed
 * by tenant id; `FACTLINE_RATE_LIMIT_TIERS` (Settings) says which tier counts which tenant. The limit and
 * period are the binding's own (`simple: { limit, period }`); every factline tier counts per
 * `periodSeconds` (the deploy check holds wrangler config to it), so `Retry-After` is that period: after it,
 * whatever the tenant sent before has left its window.
 *
 * Why the binding and not a Durable Object: the binding's counters live on the machine that runs the request
 * and sync with the Cloudflare location's store in the background — no round trip on the hot path, no
 * per-request charge. A Durable Object per tenant would count exactly, but adds a round trip to wherever the
 * object lives (tens of milliseconds from far locations) and a billed request to every API call. The price
 * is precision: counts are per location and eventually consistent, so a tenant sending through several
 * locations at once gets about its limit at each, and a burst may pass a little over it before the counter
 * catches up — enough for fairness between tenants, not for billing.
 *
 * A tier whose binding is not bound, or a limiter that fails, lets the request through (logged once per
 * isolate): a limiter outage must not become an API outage. It does not authenticate (Auth.ts runs first:
 * only a known token has a tenant to count) and does not limit the public routes (`GET /health`, the
 * documents), which read no store.
 */
import type { Settings } from "@factline/core/runtime"
import type { PlatformEnv } from "../Env.js"
import { rateLimiter, settingsOf } from "../Services.js"
import { RateLimited } from "./Problem.js"

/** The period every factline rate-limit binding counts over (`simple.period`, which Cloudflare allows at 10 or 60). */
export const periodSeconds = 10

/** The binding of the tier that counts nothing. */
export const unlimited = "unlimited"

/** The Rate Limiting binding of a tier: `default` → `FACTLINE_RATE_LIMIT`, `bulk` → `FACTLINE_RATE_LIMIT_BULK`; none for `unlimited`. */
export const bindingOf = (tier: string): string | undefined =>
  tier === unlimited ? undefined : tier === "default" ? "FACTLINE_RATE_LIMIT" : `FACTLINE_RATE_LIMIT_${tier.toUpperCase()}`

/** The tier that counts a tenant's requests. */
export const tierOf = (tiers: Settings.RateLimitTiers, tenantId: string): string => tiers.tenants.get(tenantId) ?? tiers.fallback

const warned = new Set<string>()
const warnOnce = (key: string, message: string) => {
  if (warned.has(key)) return
  warned.add(key)
  console.error(message)
}

/** Counts a request of `tenantId` against its tier; over the limit, `RateLimited` is thrown before anything is read. */
export const check = async (env: PlatformEnv, tenantId: string): Promise<void> => {
  const tier = tierOf(settingsOf(env).rateLimitTiers, tenantId)
  const binding = bindingOf(tier)
  const limiter = binding === undefined ? undefined : rateLimiter(env, binding)
  if (binding !== undefined && limiter === undefined) {
    warnOnce(binding, `rate limit tier ${tier}: ${binding} is not bound, its tenants' requests are not limited (add it to wrangler config's ratelimits)`)
  } else if (limiter !== undefined) {
    let success = true
    try {
      success = (await limiter.limit({ key: tenantId })).success
    } catch (error) {
      warnOnce(`${binding}:failed`, `rate limit tier ${tier}: ${binding} failed (${error instanceof Error ? error.name : "unknown"}), requests pass unlimited meanwhile`)
    }
    if (!success) {
      throw new RateLimited({
        message: `this tenant is over its request rate (tier ${tier}); nothing of this request was accepted: retry after ${periodSeconds} s`,
        retryAfterSeconds: periodSeconds
      })
    }
  }
}
