/**
 * How long a tenant's accepted idempotency keys are kept (`FACTLINE_KEY_RETENTION_DAYS`): whole days for every
 * tenant (default 30), or per tenant as JSON `{ "*": 30, "<tenant>": 7, … }`, parsed as `FACTLINE_LEDGER_HOT_DAYS` is.
 *
 * Why a setting and not keys spread over databases: the largest tenant's home database is nearly all its keys
 * (30 days of them), and shortening their life is what bounds it. Spreading one tenant's keys over several
 * databases would break `AcceptedKeys.record`'s all-or-nothing binding of a request's keys (one transaction in one
 * database: a refused request records none) or cost a second round trip per request. A key forgotten early only
 * means a client retrying with it after its retention is treated as a new request: the ledger still refuses a
 * fact twice (deterministic fact ids), so a queue's redelivery of an accepted message changes nothing.
 *
 * The floor is one day (a client's retries of one request: Stripe keeps keys 24 hours); at most ten years.
 * It does not decide when the prune runs (Maintenance) nor how it walks the keys (AcceptedKeys.prune).
 */

/** The default life of an accepted key, in days (as the batch inbox's rows, docs/operating.md). */
export const defaultDays = 30
/** The shortest life a key may be given, in days. */
export const minDays = 1
const maxDays = 3650

/** Each tenant's key life in days. */
export interface Retention {
  readonly days: (tenant: string) => number
  /** The tenants named in the setting with their own life (not `*`). */
  readonly tenants: ReadonlyArray<string>
}

export const standard: Retention = { days: () => defaultDays, tenants: [] }

const valid = (value: unknown): value is number => typeof value === "number" && Number.isInteger(value) && value >= minDays && value <= maxDays

/** `FACTLINE_KEY_RETENTION_DAYS` → each tenant's key life, or what is wrong with it. */
export const parse = (raw: string | undefined): Retention | string => {
  if (raw === undefined || raw.trim() === "") return standard
  const range = `whole days from ${minDays} to ${maxDays}`
  if (/^\s*-?\d+\s*$/.test(raw)) {
    const n = Number(raw)
    return valid(n) ? { days: () => n, tenants: [] } : `must be ${range}, got ${JSON.stringify(raw)}`
  }
  let json: unknown
  try {
    json = JSON.parse(raw)
  } catch {
    json = undefined
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return `must be ${range} (e.g. 30) or a JSON object of tenant id (or "*") → days, got ${JSON.stringify(raw)}`
  const entries = Object.entries(json as Record<string, unknown>)
  const bad = entries.find(([, value]) => !valid(value))
  if (bad !== undefined) return `${JSON.stringify(bad[0])}: must be ${range}, got ${JSON.stringify(bad[1])}`
  const byTenant = new Map(entries as Array<[string, number]>)
  const fallback = byTenant.get("*") ?? defaultDays
  return { days: (tenant) => byTenant.get(tenant) ?? fallback, tenants: [...byTenant.keys()].filter((t) => t !== "*") }
}

/** When keys expire at `now` (ms): the cutoff of every tenant not named, and each named tenant's own (ISO-8601). */
export const cutoffs = (retention: Retention, now: number): { readonly before: string; readonly tenants: Readonly<Record<string, string>> } => {
  const at = (days: number) => new Date(now - days * 24 * 3600 * 1000).toISOString()
  // `days("*")` is the fallback: "*" is not a tenant id (ids start with a letter or digit).
  return { before: at(retention.days("*")), tenants: Object.fromEntries(retention.tenants.map((t) => [t, at(retention.days(t))])) }
}
