/**
 * What a webhook endpoint's host name resolves to, asked at delivery time so a
 * name that passed the URL guard when it was registered cannot later point at
 * a private address (a changed record, a wildcard-DNS name, DNS rebinding).
 * The delivery consumer checks every answer with `UrlGuard.addressRule` and
 * sends nothing when one is refused.
 *
 * The live layer asks Cloudflare's DNS over HTTPS resolver (JSON API: A and
 * AAAA, in parallel) and caches each answer per isolate for its TTL, at most
 * `maxCacheSeconds` — a hot endpoint costs one lookup a minute, not one per
 * delivery. A resolver that does not answer (network, HTTP status, SERVFAIL)
 * is `Failure.Unavailable`: the delivery is retried, never sent unchecked. A
 * name with no address (NXDOMAIN, no records) answers an empty list: the POST
 * then fails on its own, as a failed attempt.
 *
 * `none` answers nothing for every name: for local development (the tests
 * and `npm run dev` have no internet, and their receiver is on loopback).
 * `answering` is the test layer: fixed answers per name.
 *
 * It does not decide what is allowed (`UrlGuard` does) and resolves no IP
 * literal (the consumer passes only names).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Failure from "../failures/Failure.js"

export const defaultEndpoint = "https://cloudflare-dns.com/dns-query"
/** The longest an answer is reused, whatever its TTL. */
export const maxCacheSeconds = 60
/** Hosts remembered per isolate; the oldest entry goes first when full. */
export const maxCachedHosts = 1_000
export const timeoutMs = 5_000

export class Resolver extends Context.Service<Resolver, {
  /** Every address `host` resolves to (A and AAAA records, CNAMEs followed by the resolver). */
  readonly resolve: (host: string) => Effect.Effect<ReadonlyArray<string>, Failure.Unavailable>
}>()("@factline/core/Resolver") {
  /** DNS over HTTPS (Cloudflare's resolver unless `endpoint` says otherwise), with a per-isolate cache. */
  static readonly dnsOverHttps = (options: { readonly endpoint?: string } = {}) => Layer.sync(Resolver, () => make(options.endpoint ?? defaultEndpoint))
  /** No lookups: every name answers no address (local development only). */
  static readonly none = Layer.succeed(Resolver, { resolve: () => Effect.succeed([]) })
  /** Fixed answers per host name (tests: the internet cannot be reached); an unknown name answers no address. */
  static readonly answering = (answers: Readonly<Record<string, ReadonlyArray<string> | "unavailable">>) =>
    Layer.succeed(Resolver, {
      resolve: (host) => {
        const answer = answers[host]
        return answer === "unavailable" ? Effect.fail(new Failure.Unavailable({ service: "DNS over HTTPS", message: `no answer for ${host}` })) : Effect.succeed(answer ?? [])
      }
    })
  /** The platform's layer: DNS over HTTPS, or `none` in local development. */
  static readonly layer = (settings: { readonly localDevelopment: boolean }) => (settings.localDevelopment ? Resolver.none : Resolver.dnsOverHttps())
}

/** The JSON answer of a DoH resolver (`application/dns-json`): RFC 8484's JSON dialect as Cloudflare and Google serve it. */
interface DnsJson {
  readonly Status?: number
  readonly Answer?: ReadonlyArray<{ readonly type?: number; readonly TTL?: number; readonly data?: string }>
}

const recordTypes = { A: 1, AAAA: 28 } as const
/** NOERROR and NXDOMAIN are answers; anything else (SERVFAIL, REFUSED…) is the resolver not answering. */
const answered = (status: number | undefined) => status === 0 || status === 3

const query = async (endpoint: string, host: string, type: keyof typeof recordTypes) => {
  const url = `${endpoint}?name=${encodeURIComponent(host)}&type=${type}`
  const response = await fetch(url, { headers: { accept: "application/dns-json" }, signal: AbortSignal.timeout(timeoutMs) })
  if (!response.ok) throw new Error(`${type} lookup of ${host} answered HTTP ${response.status}`)
  const body = (await response.json()) as DnsJson
  if (!answered(body.Status)) throw new Error(`${type} lookup of ${host} answered DNS status ${body.Status}`)
  return (body.Answer ?? []).filter((r) => r.type === recordTypes[type] && typeof r.data === "string").map((r) => ({ address: r.data!, ttl: r.TTL ?? 0 }))
}

export const make = (endpoint: string): Resolver["Service"] => {
  const cache = new Map<string, { readonly until: number; readonly addresses: ReadonlyArray<string> }>()
  return {
    resolve: Effect.fn("Resolver.resolve")(function*(host: string) {
      const now = yield* Clock.currentTimeMillis
      const cached = cache.get(host)
      if (cached !== undefined && cached.until > now) return cached.addresses
      const records = yield* Effect.tryPromise({
        try: () => Promise.all([query(endpoint, host, "A"), query(endpoint, host, "AAAA")]).then(([a, aaaa]) => [...a, ...aaaa]),
        catch: Failure.unavailable("DNS over HTTPS")
      })
      const addresses = records.map((r) => r.address)
      const ttlSeconds = Math.min(maxCacheSeconds, ...records.map((r) => r.ttl))
      cache.delete(host)
      if (records.length > 0 && ttlSeconds > 0) {
        if (cache.size >= maxCachedHosts) cache.delete(cache.keys().next().value!)
        cache.set(host, { until: now + ttlSeconds * 1000, addresses })
      }
      return addresses
    })
  }
}
