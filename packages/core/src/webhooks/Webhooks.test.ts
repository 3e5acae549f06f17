import { describe, expect, it } from "vitest"
import { Webhook } from "standardwebhooks"
import * as Secrets from "./Secrets.js"
import * as Signing from "./Signing.js"
import * as UrlGuard from "./UrlGuard.js"

const production = { localDevelopment: false }
const local = { localDevelopment: true }
const rule = (url: string, options = production) => {
  const r = UrlGuard.check(url, options)
  return r.ok ? "ok" : r.rule
}

describe("SSRF guard", () => {
  it("accepts public https URLs", () => {
    expect(rule("https://hooks.example.com/factline")).toBe("ok")
    expect(rule("https://93.184.215.14:8443/x")).toBe("ok")
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
