/** `factline tokens`: what it writes is what http/Auth.ts authenticates, and nothing secret is kept or listed. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Auth from "../src/http/Auth.ts"
import * as Tokens from "./tokens.ts"

const dir = mkdtempSync(join(tmpdir(), "factline-tokens-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const run = async (...argv) => {
  let out = ""
  let err = ""
  const code = await Tokens.run(argv, { out: (s) => (out += s), err: (s) => (err += s) }, {})
  return { code, out, err }
}
const tokenIn = (output) => /\b(fl_[0-9A-Za-z]{43})\b/.exec(output)?.[1]

describe("factline tokens", () => {
  it("creates a token that Auth authenticates with its tenant and scopes; revoking it makes it unknown", async () => {
    const file = join(dir, ".dev.vars")
    writeFileSync(file, "# local\nFACTLINE_SECRETS_KEY='k'\n")
    const created = await run("create", "--tenant", "acme", "--scopes", "read,events:write", "--name", "billing", "--file", file)
    expect(created.code, created.err).toBe(0)
    const token = tokenIn(created.out)
    expect(token).toMatch(Tokens.tokenPattern)

    const text = readFileSync(file, "utf8")
    expect(text).toContain("FACTLINE_SECRETS_KEY='k'") // the other lines are kept
    expect(text).not.toContain(token) // only the hash is stored
    const value = /^FACTLINE_TOKENS='(.*)'$/m.exec(text)[1]
    const principal = Auth.principals(value).get(await Auth.sha256Hex(token))
    expect(principal).toEqual({ tenantId: "acme", scopes: ["read", "events:write"], name: "billing" })

    expect((await run("revoke", "billing", "--file", file)).code).toBe(0)
    const after = /^FACTLINE_TOKENS='(.*)'$/m.exec(readFileSync(file, "utf8"))[1]
    expect(Auth.principals(after).get(await Auth.sha256Hex(token))).toBeUndefined()
  })

  it("keeps two tokens valid during a rotation, until the old one is revoked", async () => {
    const file = join(dir, "tokens.json")
    const old = tokenIn((await run("create", "--tenant", "acme", "--scopes", "read", "--name", "reporting", "--file", file)).out)
    const next = tokenIn((await run("create", "--tenant", "acme", "--scopes", "read", "--name", "reporting-2", "--file", file)).out)
    const both = JSON.stringify(JSON.parse(readFileSync(file, "utf8")))
    expect(Auth.principals(both).has(await Auth.sha256Hex(old))).toBe(true)
    expect(Auth.principals(both).has(await Auth.sha256Hex(next))).toBe(true)
    await run("revoke", "reporting", "--file", file)
    const rotated = JSON.stringify(JSON.parse(readFileSync(file, "utf8")))
    expect(Auth.principals(rotated).has(await Auth.sha256Hex(old))).toBe(false)
    expect(Auth.principals(rotated).get(await Auth.sha256Hex(next))?.name).toBe("reporting-2")
  })

  it("lists names, tenants, scopes and creation times, never a token or a hash", async () => {
    const file = join(dir, "list.json")
    const token = tokenIn((await run("create", "--tenant", "t1", "--scopes", "admin", "--name", "ops", "--file", file)).out)
    const listed = await run("list", "--file", file)
    expect(listed.out).toMatch(/^NAME\s+TENANT\s+SCOPES\s+CREATED\nops\s+t1\s+admin\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$/)
    const hash = JSON.parse(readFileSync(file, "utf8"))[0].sha256
    expect(listed.out).not.toContain(token)
    expect(listed.out).not.toContain(hash)
    expect((await run("list", "--file", file, "--json")).out).not.toContain(hash)
  })

  it("prints the updated value and the wrangler secret put command when the value comes from the environment", async () => {
    let out = ""
    const current = JSON.stringify([Tokens.entryFor("fl_x", { name: "old", tenant: "acme", scopes: ["read"] })])
    const code = await Tokens.run(["create", "--tenant", "acme", "--scopes", "read", "--name", "new", "--env", "production"], { out: (s) => (out += s), err: () => {} }, { FACTLINE_TOKENS: current })
    expect(code).toBe(0)
    const printed = /^(\[.*\])$/m.exec(out)[1]
    expect(JSON.parse(printed).map((e) => e.name)).toEqual(["old", "new"])
    expect(out).toContain("npx wrangler secret put FACTLINE_TOKENS --env production")
  })

  it("refuses a duplicate name, an unknown scope, a bad tenant and a corrupt current value, writing nothing", async () => {
    const file = join(dir, "refuse.json")
    await run("create", "--tenant", "acme", "--scopes", "read", "--name", "a", "--file", file)
    const before = readFileSync(file, "utf8")
    expect((await run("create", "--tenant", "acme", "--scopes", "read", "--name", "a", "--file", file)).err).toContain("already exists")
    expect((await run("create", "--tenant", "acme", "--scopes", "reads", "--name", "b", "--file", file)).err).toContain("unknown scope(s) reads")
    expect((await run("create", "--tenant", "a b", "--scopes", "read", "--name", "b", "--file", file)).code).toBe(1)
    expect((await run("revoke", "nobody", "--file", file)).err).toContain("no token named nobody")
    expect(readFileSync(file, "utf8")).toBe(before)
    writeFileSync(file, "{oops")
    expect((await run("list", "--file", file)).err).toContain("not JSON")
  })

  it("refuses to create beside an entry Auth refuses (scope superuser): exit 1 with Auth's reason, the file as it was", async () => {
    for (const [name, text] of [
      ["superuser.json", `${JSON.stringify([{ name: "root", sha256: "a".repeat(64), tenant_id: "acme", scopes: ["superuser"] }], null, 2)}\n`],
      [".dev.vars.superuser", `# local\nFACTLINE_TOKENS='${JSON.stringify([{ name: "root", sha256: "a".repeat(64), tenant_id: "acme", scopes: ["superuser"] }])}'\n`]
    ]) {
      const file = join(dir, name)
      writeFileSync(file, text)
      const before = Auth.principals(JSON.stringify([{ name: "root", sha256: "a".repeat(64), tenant_id: "acme", scopes: ["superuser"] }]))
      expect(before.size).toBe(0) // what Auth makes of the current value: nobody
      const created = await run("create", "--tenant", "acme", "--scopes", "read", "--name", "billing", "--file", file)
      expect(created.code).toBe(1)
      expect(created.err).toContain("superuser")
      expect(created.out).not.toMatch(/fl_[0-9A-Za-z]{43}/) // no token handed out that would not work
      expect(readFileSync(file, "utf8")).toBe(text)
    }
  })

  it("refuses to print a value Auth would refuse when the current value comes from the environment", async () => {
    const current = JSON.stringify([{ sha256: "b".repeat(64), tenant_id: "acme", scopes: ["read"], created_at: "yesterday" }])
    let out = ""
    let err = ""
    const code = await Tokens.run(["create", "--tenant", "acme", "--scopes", "read", "--name", "new"], { out: (s) => (out += s), err: (s) => (err += s) }, { FACTLINE_TOKENS: current })
    expect(code).toBe(1)
    expect(err).toContain("created_at")
    expect(out).toBe("")
  })

  it("revoking the entry Auth refuses repairs the value: what is written parses to the remaining principals", async () => {
    const file = join(dir, "repair.json")
    const good = Tokens.entryFor("fl_good", { name: "good", tenant: "acme", scopes: ["read"] })
    writeFileSync(file, JSON.stringify([good, { name: "root", sha256: "c".repeat(64), tenant_id: "acme", scopes: ["superuser"] }]))
    expect((await run("revoke", "root", "--file", file)).code).toBe(0)
    const table = Auth.principals(JSON.stringify(JSON.parse(readFileSync(file, "utf8"))))
    expect([...table.entries()]).toEqual([[good.sha256, { tenantId: "acme", scopes: ["read"], name: "good" }]])
  })

  it("every value it writes parses with Auth's parser to exactly the tokens created and not revoked", async () => {
    const file = join(dir, "sequence.dev.vars")
    const live = new Map()
    const steps = [["create", "a", "t1", "read"], ["create", "b", "t2", "events:write,read"], ["create", "c", "t1", "admin"], ["revoke", "a"], ["create", "d", "factline", "platform"], ["revoke", "c"]]
    for (const [command, name, tenant, scopes] of steps) {
      const result = command === "create"
        ? await run("create", "--tenant", tenant, "--scopes", scopes, "--name", name, "--file", file)
        : await run("revoke", name, "--file", file)
      expect(result.code, result.err).toBe(0)
      if (command === "create") live.set(name, { token: tokenIn(result.out), principal: { tenantId: tenant, scopes: scopes.split(","), name } })
      else live.delete(name)
      const table = Auth.principals(/^FACTLINE_TOKENS='(.*)'$/m.exec(readFileSync(file, "utf8"))[1])
      expect(table.size).toBe(live.size)
      for (const { token, principal } of live.values()) expect(table.get(await Auth.sha256Hex(token))).toEqual(principal)
    }
  })

  it("warns when a tenant's token is given the platform scope, and not for an operator's platform-only token", async () => {
    const file = join(dir, "platform.json")
    const mixed = await run("create", "--tenant", "acme", "--scopes", "read,platform", "--name", "acme-ops", "--file", file)
    expect(mixed.code).toBe(0)
    expect(mixed.err).toMatch(/warning: .*platform.*every tenant/)
    const operator = await run("create", "--tenant", "factline", "--scopes", "platform", "--name", "operator", "--file", file)
    expect(operator.code).toBe(0)
    expect(operator.err).toBe("")
    const tenantsOwn = await run("create", "--tenant", "acme", "--scopes", "platform", "--name", "acme-platform", "--file", file)
    expect(tenantsOwn.err).toMatch(/warning: .*platform/) // acme already has a tenant token: this is a tenant's token
  })

  it("makes tokens with 256 random bits behind the fl_ prefix, all distinct", () => {
    const tokens = new Set(Array.from({ length: 1000 }, () => Tokens.generate()))
    expect(tokens.size).toBe(1000)
    for (const t of tokens) expect(t).toMatch(/^fl_[0-9A-Za-z]{43}$/) // 62^43 > 2^256
  })

  it("knows exactly the scopes Auth knows", () => {
    expect(Tokens.scopes).toEqual(Auth.Scope.literals)
  })
})
