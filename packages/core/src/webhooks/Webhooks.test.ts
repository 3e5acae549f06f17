import { it as effect } from "@effect/vitest"
import { Effect, Layer, Result, Schema } from "effect"
import { TestClock } from "effect/testing"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Webhook } from "standardwebhooks"
import * as FactDefinition from "../definitions/FactDefinition.js"
import * as Handler from "../definitions/Handler.js"
import * as MessageDefinition from "../definitions/MessageDefinition.js"
import * as Module from "../definitions/Module.js"
import * as WebhookDefinition from "../definitions/Webhook.js"
import { Ledger } from "../ledger/Ledger.js"
import * as FactMessage from "../relay/FactMessage.js"
import { fact } from "../testing/Builders.js"
import * as TestPlatform from "../testing/TestPlatform.js"
import { Resolver } from "./Resolver.js"
import * as Secrets from "./Secrets.js"
import * as Signing from "./Signing.js"
import * as UrlGuard from "./UrlGuard.js"
import * as WebhookConsumer from "./WebhookConsumer.js"
import { WebhookStore } from "./WebhookStore.js"

const production = { localDevelopment: false }
const local = { localDevelopment: true }
const rule = (url: string, options = production) => {
  const r = UrlGuard.check(url, options)
  return r.ok ? "ok" : r.rule
}

describe("SSRF guard", () => {
  it("accepts public https URLs", () => {
    expect(rule("https://hooks.example.com/factline")).toBe("ok")
    expect(rule("https://93.184.215.14/x")).toBe("ok")
    expect(rule("https://hooks.example.com:443/x")).toBe("ok")
    expect(rule("https://[2606:4700::1111]/x")).toBe("ok")
  })

  it("refuses other schemes, credentials, and private, loopback, link-local, CGNAT and metadata targets, naming the rule", () => {
    expect(rule("http://hooks.example.com")).toBe("must use https")
    expect(rule("ftp://hooks.example.com")).toBe("must use https")
    expect(rule("https://user:pw@hooks.example.com")).toBe("must not contain credentials")
    expect(rule("not a url")).toMatch(/absolute URL/)
    expect(rule("https://10.1.2.3/x")).toMatch(/private addresses/)
    expect(rule("https://172.20.0.1/x")).toMatch(/private addresses/)
    expect(rule("https://192.168.1.1/x")).toMatch(/private addresses/)
    expect(rule("https://127.0.0.1/x")).toMatch(/loopback/)
    expect(rule("https://2130706433/x")).toMatch(/loopback/)               // 127.0.0.1 as an integer
    expect(rule("https://0x7f.1/x")).toMatch(/loopback/)                   // and in hex
    expect(rule("https://localhost/x")).toMatch(/loopback names/)
    expect(rule("https://169.254.169.254/latest/meta-data")).toMatch(/metadata/)
    expect(rule("https://100.64.0.1/x")).toMatch(/carrier-grade NAT/)
    expect(rule("https://0.0.0.0/x")).toMatch(/unspecified/)
    expect(rule("https://[::1]/x")).toMatch(/loopback/)
    expect(rule("https://[fd00::1]/x")).toMatch(/unique-local/)
    expect(rule("https://[fe80::1]/x")).toMatch(/link-local/)
    expect(rule("https://[::ffff:169.254.169.254]/x")).toMatch(/metadata/)
    expect(rule("https://[::ffff:10.0.0.1]/x")).toMatch(/private/)
    expect(rule("https://metadata.google.internal/x")).toMatch(/metadata host names/)
    expect(rule("https://intranet/x")).toMatch(/public host name/)
  })

  it("local development allows http and loopback, never metadata or private ranges", () => {
    expect(rule("http://127.0.0.1:9999/hook", local)).toBe("ok")
    expect(rule("http://localhost:9999/hook", local)).toBe("ok")
    expect(rule("http://[::1]:9999/hook", local)).toBe("ok")
    expect(rule("http://169.254.169.254/x", local)).toMatch(/metadata/)
    expect(rule("http://10.0.0.1/x", local)).toMatch(/private/)
  })
})

describe("SSRF guard: names, embedded forms, reserved ranges and ports (issue 21, defect 5)", () => {
  it("refuses public names that resolve to loopback for everyone", () => {
    expect(rule("https://localtest.me/x")).toMatch(/loopback names are not allowed \(localtest\.me resolves to 127\.0\.0\.1\)/)
    expect(rule("https://api.localtest.me/x")).toMatch(/loopback names/)
    expect(rule("https://lvh.me/x")).toMatch(/loopback names/)
  })

  it("refuses wildcard-DNS names that spell a refused address: dotted, dashed, hex, IPv6, rebinding services", () => {
    expect(rule("https://127.0.0.1.nip.io/x")).toMatch(/spell 127\.0\.0\.1 .*loopback addresses/)
    expect(rule("https://169.254.169.254.nip.io/latest/meta-data")).toMatch(/spell 169\.254\.169\.254 .*cloud metadata/)
    expect(rule("https://10.0.0.1.sslip.io/x")).toMatch(/spell 10\.0\.0\.1 .*private addresses/)
    expect(rule("https://app-10-0-0-1.nip.io/x")).toMatch(/spell 10\.0\.0\.1 .*private addresses/)
    expect(rule("https://magic.0a000001.nip.io/x")).toMatch(/spell 10\.0\.0\.1 .*private addresses/)
    expect(rule("https://--1.sslip.io/x")).toMatch(/spell ::1 .*loopback/)
    expect(rule("https://7f000001.5db8d70e.rbndr.us/x")).toMatch(/spell 127\.0\.0\.1/)                  // DNS rebinding: public, then loopback
    expect(rule("https://make-93.184.215.14-rebind-169.254.169.254-rr.1u.ms/x")).toMatch(/spell 169\.254\.169\.254/)
    expect(rule("https://192.168.1.20.example.com/x")).toMatch(/spell 192\.168\.1\.20 .*private/) // four numeric labels in any name
    // A public address spelled in a name is just a name.
    expect(rule("https://93.184.215.14.nip.io/x")).toBe("ok")
    expect(rule("https://deadbeef.nip.io/x")).toBe("ok")
  })

  it("refuses every IPv6 form that embeds a private IPv4 address, naming the form and the IPv4 rule", () => {
    expect(rule("https://[2002:a9fe:a9fe::1]/x")).toBe("embeds 169.254.169.254 (6to4 2002::/16): link-local and cloud metadata addresses (169.254.0.0/16) are not allowed")
    expect(rule("https://[::ffff:0:a9fe:a9fe]/x")).toMatch(/^embeds 169\.254\.169\.254 \(IPv4-translated ::ffff:0:0:0\/96\): link-local/)
    expect(rule("https://[64:ff9b::a9fe:a9fe]/x")).toMatch(/^embeds 169\.254\.169\.254 \(NAT64 64:ff9b::\/96\): link-local/)
    expect(rule("https://[::a9fe:a9fe]/x")).toMatch(/^embeds 169\.254\.169\.254 \(IPv4-compatible ::\/96\): link-local/)
    expect(rule("https://[::ffff:10.0.0.1]/x")).toMatch(/^embeds 10\.0\.0\.1 \(IPv4-mapped ::ffff:0:0\/96\): private/)
    expect(rule("https://[2606:4700::5efe:a9fe:a9fe]/x")).toMatch(/^embeds 169\.254\.169\.254 \(ISATAP\)/)
    expect(rule("https://[100::a9fe:a9fe]/x")).toBe("discard-only addresses (100::/64) are not allowed")
    expect(rule("https://[64:ff9b:1::a9fe:a9fe]/x")).toMatch(/local-use NAT64/)
    // Teredo carries the client's IPv4 obfuscated: the whole prefix is refused.
    expect(rule("https://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/x")).toBe("Teredo addresses (2001::/32) are not allowed")
    expect(rule("https://[2001:2::1]/x")).toMatch(/IETF protocol assignments/)
    expect(rule("https://[fec0::1]/x")).toMatch(/site-local/)
    expect(rule("https://[3fff::1]/x")).toMatch(/documentation/)
    expect(rule("https://[4000::1]/x")).toMatch(/only global unicast/)
    // A mapped public IPv4 is refused too: the IPv4 literal is the one way to write it.
    expect(rule("https://[::ffff:8.8.8.8]/x")).toMatch(/use the IPv4 address 8\.8\.8\.8 itself/)
    // 6to4 of a public IPv4 is a public address.
    expect(rule("https://[2002:5db8:d70e::1]/x")).toBe("ok")
  })

  it("refuses the reserved IPv4 ranges it missed, and no longer refuses public 192.0.x.x", () => {
    expect(rule("https://192.88.99.1/x")).toMatch(/6to4 relay anycast addresses \(192\.88\.99\.0\/24\) are reserved/)
    expect(rule("https://198.51.100.7/x")).toMatch(/documentation addresses/)
    expect(rule("https://203.0.113.9/x")).toMatch(/documentation addresses/)
    expect(rule("https://192.0.0.8/x")).toMatch(/reserved addresses/)
    expect(rule("https://192.0.32.10/x")).toBe("ok")
  })

  it("drops any number of trailing dots before checking, and refuses empty labels", () => {
    expect(rule("https://localhost../x")).toMatch(/loopback names/)
    expect(rule("https://localhost.../x")).toMatch(/loopback names/)
    expect(rule("https://metadata.google.internal../x")).toMatch(/metadata host names/)
    expect(rule("https://127.0.0.1../x")).toMatch(/loopback addresses/)
    expect(rule("https://hooks..example.com/x")).toMatch(/must not have an empty label/)
    expect(rule("https://hooks.example.com./x")).toBe("ok")
  })

  it("allows port 443 only; in local development also 80, and any port on loopback", () => {
    expect(rule("https://hooks.example.com:22/x")).toBe("port 22 is not allowed: use 443")
    expect(rule("https://hooks.example.com:6379/x")).toBe("port 6379 is not allowed: use 443")
    expect(rule("https://hooks.example.com:0/x")).toBe("port 0 is not allowed: use 443")
    expect(rule("https://hooks.example.com:80/x")).toMatch(/port 80 is not allowed/)
    expect(rule("https://hooks.example.com:8443/x")).toMatch(/port 8443 is not allowed/)
    expect(rule("http://hooks.example.com/x", local)).toBe("ok")
    expect(rule("https://hooks.example.com:80/x", local)).toBe("ok")
    expect(rule("http://hooks.example.com:6379/x", local)).toMatch(/port 6379 is not allowed: use 443 or 80/)
    expect(rule("http://127.0.0.1:6379/x", local)).toBe("ok")
    expect(rule("http://localhost:22/x", local)).toBe("ok")
  })

  it("checks resolved addresses with the same rules: private answers refused, public ones allowed, anything else refused", () => {
    expect(UrlGuard.addressRule("10.0.0.7", production)).toMatch(/private addresses/)
    expect(UrlGuard.addressRule("169.254.169.254", production)).toMatch(/cloud metadata/)
    expect(UrlGuard.addressRule("127.0.0.1", production)).toMatch(/loopback/)
    expect(UrlGuard.addressRule("127.0.0.1", local)).toBeUndefined()
    expect(UrlGuard.addressRule("64:ff9b::a9fe:a9fe", production)).toMatch(/NAT64/)
    expect(UrlGuard.addressRule("FD00::1", production)).toMatch(/unique-local/)
    expect(UrlGuard.addressRule("93.184.215.14", production)).toBeUndefined()
    expect(UrlGuard.addressRule("2606:4700::1111", production)).toBeUndefined()
    expect(UrlGuard.addressRule("example.com", production)).toMatch(/is not an IP address/)
  })
})

/** A real HTTP server on loopback for the test's lifetime: `answer` per request, every request recorded. */
const serve = (answer: (req: IncomingMessage, res: ServerResponse) => void) => {
  const requests: Array<{ readonly url: string; readonly accept: string | undefined }> = []
  const server = createServer((req, res) => {
    requests.push({ url: req.url ?? "", accept: req.headers.accept })
    req.resume().on("end", () => answer(req, res))
  })
  return {
    requests,
    start: () => new Promise<string>((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as { port: number }).port}`))),
    stop: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

describe("Resolver over DNS over HTTPS (a DoH JSON server on loopback stands in for cloudflare-dns.com)", () => {
  /** Answers per (name, type) in the JSON dialect Cloudflare serves; `fail.example` answers 503, `servfail.example` SERVFAIL. */
  const doh = serve((req, res) => {
    const url = new URL(req.url ?? "/", "http://doh")
    const name = url.searchParams.get("name")
    const type = url.searchParams.get("type")
    if (name === "fail.example") return void res.writeHead(503).end("unavailable")
    const body = name === "servfail.example"
      ? { Status: 2 }
      : name === "nowhere.example"
      ? { Status: 3 }
      : type === "A"
      ? { Status: 0, Answer: [{ name, type: 5, TTL: 300, data: "edge.example." }, { name: "edge.example", type: 1, TTL: name === "short.example" ? 5 : 300, data: "93.184.215.14" }] }
      : { Status: 0, Answer: [{ name, type: 28, TTL: 300, data: "2606:4700::1111" }] }
    res.writeHead(200, { "content-type": "application/dns-json" }).end(JSON.stringify(body))
  })
  let endpoint = ""
  beforeAll(async () => void (endpoint = `${await doh.start()}/dns-query`))
  afterAll(() => doh.stop())
  const resolve = (host: string) => Resolver.use((r) => r.resolve(host))
  const layer = () => Resolver.dnsOverHttps({ endpoint })
  const asked = (host: string) => doh.requests.filter((r) => r.url.includes(`name=${host}&`)).length

  effect.effect("asks A and AAAA as application/dns-json and answers both address lists, CNAME records left out", () =>
    Effect.gen(function*() {
      expect(yield* resolve("both.example")).toEqual(["93.184.215.14", "2606:4700::1111"])
      expect(doh.requests.filter((r) => r.url.includes("name=both.example")).map((r) => [r.url.replace(/.*type=/, ""), r.accept])).toEqual([["A", "application/dns-json"], ["AAAA", "application/dns-json"]])
    }).pipe(Effect.provide(layer())))

  effect.effect("reuses an answer for its TTL, at most 60 s", () =>
    Effect.gen(function*() {
      yield* resolve("cached.example")
      yield* resolve("short.example")
      yield* TestClock.adjust("4 seconds")
      yield* resolve("cached.example")
      yield* resolve("short.example")
      expect([asked("cached.example"), asked("short.example")]).toEqual([2, 2])   // one A and one AAAA each
      yield* TestClock.adjust("2 seconds")                                         // past the 5 s TTL
      yield* resolve("short.example")
      expect(asked("short.example")).toBe(4)
      yield* TestClock.adjust("55 seconds")                                        // TTL 300, capped at 60
      yield* resolve("cached.example")
      expect(asked("cached.example")).toBe(4)
    }).pipe(Effect.provide(layer())))

  effect.effect("a resolver that does not answer is Unavailable (retryable); NXDOMAIN is no address", () =>
    Effect.gen(function*() {
      for (const host of ["fail.example", "servfail.example"]) {
        const failed = yield* Effect.result(resolve(host))
        expect(Result.isFailure(failed) && failed.failure.retryable, host).toBe(true)
        expect(Result.isFailure(failed) && failed.failure.message, host).toMatch(/lookup of .* answered (HTTP 503|DNS status 2)/)
      }
      expect(yield* resolve("nowhere.example")).toEqual([])
    }).pipe(Effect.provide(layer())))
})

describe("delivery-time resolution: an endpoint whose name resolves to a private address is never sent to", () => {
  const Completed = MessageDefinition.event("call.completed").version(1, Schema.Struct({ call_id: Schema.String }))
  const Charged = FactDefinition.make("charged", Schema.Struct({ call_id: Schema.String, amount_cents: Schema.Int }))
  const charge = Handler.handler(Completed, { name: "charge", emits: [Charged], handle: (m) => Effect.succeed([Charged.make({ call_id: m.payload.call_id, amount_cents: 250 })]) })
  const billing = Module.make("billing", { handlers: [charge], webhooks: [WebhookDefinition.event(Charged, { type: "charge.created" })] })
  const receiver = serve((_, res) => void res.writeHead(200).end("ok"))
  let receiverUrl = ""
  beforeAll(async () => void (receiverUrl = await receiver.start()))
  afterAll(() => receiver.stop())

  /** A platform with one endpoint at `localhost` (a name, so it is resolved) on the loopback receiver; a charge fanned out to it. */
  const deliveryOf = async () => {
    const platform = TestPlatform.make([billing], { settings: { FACTLINE_LOCAL_DEVELOPMENT: "true", FACTLINE_SECRETS_KEY: Secrets.generateKey() } })
    const path = `/hooks/${crypto.randomUUID()}`
    const { endpoint } = await platform.run(WebhookStore.use((store) => store.create("tenant-test", { url: `${receiverUrl.replace("127.0.0.1", "localhost")}${path}`, event_types: ["charge.created"] })))
    // Appended after the endpoint was created (an endpoint receives only the facts appended since it existed).
    const charged = fact(Charged, { call_id: "c1", amount_cents: 250 }, { stream: "c1", createdAt: new Date(Date.now() + 1).toISOString() })
    const first = { id: "m1", attempts: 1, last: false }
    await platform.run(Effect.flatMap(WebhookConsumer.decode(FactMessage.make(charged), first), WebhookConsumer.process({ localDevelopment: true })))
    const [message] = platform.queues.get("factline-webhooks")!.sent
    const items = await platform.run(WebhookConsumer.decode(message, first))
    return { platform, endpoint, path, items, charged }
  }
  const sentTo = (path: string) => receiver.requests.filter((r) => r.url === path).length

  it("a private answer: no request, the attempt recorded with the reason, webhook_failed appended, a permanent failure (dead-lettered, never retried)", async () => {
    const { platform, endpoint, path, items, charged } = await deliveryOf()
    const outcomes = await platform.run(WebhookConsumer.process({ localDevelopment: true })(items).pipe(Effect.provide(Resolver.answering({ localhost: ["93.184.215.14", "10.0.0.7"] }))))
    const outcome = [...outcomes.values()][0]!
    expect(Result.isFailure(outcome)).toBe(true)
    const failure = (outcome as Result.Failure<void, any>).failure
    expect(failure.retryable).toBe(false)
    expect(failure.reason).toBe("permanent_failure")
    expect(failure.message).toBe(`delivery to endpoint ${endpoint.id} refused, nothing sent: localhost resolves to 10.0.0.7: private addresses (10/8, 172.16/12, 192.168/16) are not allowed`)
    expect(sentTo(path)).toBe(0)
    const attempts = await platform.run(WebhookStore.use((store) => store.attempts("tenant-test", endpoint.id, { limit: 10 })))
    expect(attempts.data.map((a) => [a.succeeded, a.status_code, a.error])).toEqual([[false, null, "refused, nothing sent: localhost resolves to 10.0.0.7: private addresses (10/8, 172.16/12, 192.168/16) are not allowed"]])
    const stream = await platform.run(Ledger.use((ledger) => ledger.read({ tenant_id: "tenant-test", stream: charged.stream })))
    expect(stream.facts.filter((f) => f.type === "webhook_failed").map((f) => (f.data as { error: string }).error)).toEqual([expect.stringContaining("resolves to 10.0.0.7")])
  })

  it("a resolver that does not answer: nothing sent, retried (transient); a public answer: sent", async () => {
    const { platform, path, items } = await deliveryOf()
    const unanswered = await platform.run(WebhookConsumer.process({ localDevelopment: true })(items).pipe(Effect.provide(Resolver.answering({ localhost: "unavailable" }))))
    const failure = ([...unanswered.values()][0] as Result.Failure<void, any>).failure
    expect(failure.retryable).toBe(true)
    expect(failure.message).toMatch(/not attempted: its host could not be resolved \(no answer for localhost\)/)
    expect(sentTo(path)).toBe(0)
    const sent = await platform.run(WebhookConsumer.process({ localDevelopment: true })(items).pipe(Effect.provide(Resolver.answering({ localhost: ["93.184.215.14"] }))))
    expect(Result.isSuccess([...sent.values()][0]!)).toBe(true)
    expect(sentTo(path)).toBe(1)
  })

  it("the platform resolves nothing in local development (no internet there): the loopback receiver is sent to", async () => {
    const { platform, path, items } = await deliveryOf()
    const outcomes = await platform.run(WebhookConsumer.process({ localDevelopment: true })(items))
    expect(Result.isSuccess([...outcomes.values()][0]!)).toBe(true)
    expect(sentTo(path)).toBe(1)
  })
})

describe("per-endpoint limits in the test kit (the limiter's state in memory, as its Durable Object keeps it)", () => {
  const Completed = MessageDefinition.event("call.completed").version(1, Schema.Struct({ call_id: Schema.String }))
  const Charged = FactDefinition.make("charged", Schema.Struct({ call_id: Schema.String, amount_cents: Schema.Int }))
  const charge = Handler.handler(Completed, { name: "charge", emits: [Charged], handle: (m) => Effect.succeed([Charged.make({ call_id: m.payload.call_id, amount_cents: 250 })]) })
  const billing = Module.make("billing", { handlers: [charge], webhooks: [WebhookDefinition.event(Charged, { type: "charge.created" })] })
  const receiver = serve((_, res) => void res.writeHead(200).end("ok"))
  let receiverUrl = ""
  beforeAll(async () => void (receiverUrl = await receiver.start()))
  afterAll(() => receiver.stop())

  it("one in flight: of two deliveries in a batch one is POSTed, the other parked (no attempt spent) and listed as throttled", async () => {
    const platform = TestPlatform.make([billing], { settings: { FACTLINE_LOCAL_DEVELOPMENT: "true", FACTLINE_SECRETS_KEY: Secrets.generateKey() } })
    const path = `/hooks/${crypto.randomUUID()}`
    const { endpoint } = await platform.run(WebhookStore.use((store) => store.create("tenant-test", { url: `${receiverUrl}${path}`, event_types: ["charge.created"], max_in_flight: 1 })))
    expect(endpoint).toMatchObject({ max_in_flight: 1, max_per_second: null })
    const first = { id: "m1", attempts: 1, last: false }
    const createdAt = new Date(Date.now() + 1).toISOString()
    for (const call of ["c1", "c2"]) {
      const charged = fact(Charged, { call_id: call, amount_cents: 250 }, { stream: call, createdAt })
      await platform.run(Effect.flatMap(WebhookConsumer.decode(FactMessage.make(charged), first), WebhookConsumer.process(local)))
    }
    const messages = platform.queues.get("factline-webhooks")!.sent
    expect(messages).toHaveLength(2)
    const items = (await Promise.all(messages.map((m) => platform.run(WebhookConsumer.decode(m, first))))).flat()
    const outcomes = [...(await platform.run(WebhookConsumer.process(local)(items))).values()]
    expect(outcomes.filter(Result.isSuccess)).toHaveLength(1)
    const parked = outcomes.filter(Result.isFailure).map((o) => o.failure)
    expect(parked.map((f) => [f.retryable, f.parkSeconds])).toEqual([[true, 1]])
    expect(receiver.requests.filter((r) => r.url === path)).toHaveLength(1)
    const attempts = await platform.run(WebhookStore.use((store) => store.attempts("tenant-test", endpoint.id, { limit: 10 })))
    expect(attempts.data.map((a) => [a.throttled, a.succeeded, a.attempt]).sort()).toEqual([[false, true, 1], [true, false, 0]])
  })
})

describe("signing secrets at rest", () => {
  it("seals with AES-GCM and opens only with the same key; a tampered value is refused", async () => {
    const key = await Secrets.importKey(Secrets.generateKey())
    const secret = Secrets.generateSigningSecret()
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    const sealed = await Secrets.seal(key, secret)
    expect(sealed).not.toContain(secret.slice(6, 20))
    expect(await Secrets.open(key, sealed)).toBe(secret)
    expect(await Secrets.seal(key, secret)).not.toBe(sealed)                // a fresh IV each time
    const other = await Secrets.importKey(Secrets.generateKey())
    await expect(Secrets.open(other, sealed)).rejects.toThrow(/could not be decrypted/)
    const tampered = sealed.slice(0, -2) + (sealed.endsWith("A") ? "BB" : "AA")
    await expect(Secrets.open(key, tampered)).rejects.toThrow(/could not be decrypted/)
  })

  it("refuses a missing or malformed key", async () => {
    await expect(Secrets.importKey(undefined)).rejects.toThrow(/FACTLINE_SECRETS_KEY is not set/)
    await expect(Secrets.importKey(btoa("short"))).rejects.toThrow(/must be 32 bytes/)
  })
})

describe("Standard Webhooks signatures", () => {
  it("verify with the standardwebhooks package, one secret or two during rotation", async () => {
    const current = Secrets.generateSigningSecret()
    const previous = Secrets.generateSigningSecret()
    const body = JSON.stringify({ type: "charge.created", timestamp: "2026-11-22T00:00:00.000Z", data: { amount_cents: 250 } })
    const now = Math.floor(Date.now() / 1000)
    const headers = await Signing.headers([current, previous], "wd_1", now, body)
    expect(headers["webhook-signature"]!.split(" ")).toHaveLength(2)
    expect(new Webhook(current).verify(body, headers)).toEqual(JSON.parse(body))
    expect(new Webhook(previous).verify(body, headers)).toEqual(JSON.parse(body))
    expect(() => new Webhook(Secrets.generateSigningSecret()).verify(body, headers)).toThrow()
    expect(() => new Webhook(current).verify(body.replace("250", "251"), headers)).toThrow()
  })
})
