/**
 * `factline init`: the app it writes passes deploy's checks, its local token authenticates, its migration
 * has the platform's tables as they are, and its tool versions are the repository's. (The app installed
 * from the packed tarballs, tested and dry-run deployed: `npm run test:release`.)
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { getTableConfig } from "drizzle-orm/sqlite-core"
import { afterAll, describe, expect, it } from "vitest"
import * as PlatformTables from "@factline/core/tables"
import * as Assets from "../dashboard/build.mjs"
import * as Auth from "../src/http/Auth.ts"
import * as Dev from "./dev.ts"
import * as Init from "./init.ts"
import * as WranglerConfig from "./WranglerConfig.ts"

const root = new URL("../../../", import.meta.url).pathname
const scratch = mkdtempSync(join(tmpdir(), "factline-init-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))
const quiet = { out: () => {}, err: () => {} }
const readJson = (path) => JSON.parse(readFileSync(path, "utf8"))

describe("factline init", () => {
  const app = join(scratch, "My Platform")
  it("writes the app: a wrangler.jsonc that passes deploy's checks, top level and each environment", async () => {
    expect(await Init.run([app], quiet)).toBe(0)
    for (const file of ["package.json", ".gitignore", ".dev.vars", "README.md", "tsconfig.json", "drizzle.config.ts", "vitest.config.ts", "vitest.node.config.ts",
      "src/index.ts", "src/modules.ts", "src/schema.ts", "src/orders/Orders.ts", "src/orders/Tables.ts", "test/orders.spec.ts", "test/orders.properties.spec.ts", "test/schemas.spec.ts", "test/migrations.spec.ts", "src/orders/schemas/order_placed.v1.json", "test/api.workers.test.ts",
      "migrations/0000_init.sql", "migrations/meta/_journal.json"]) expect(existsSync(join(app, file)), file).toBe(true)
    const config = WranglerConfig.parseJsonc(readFileSync(join(app, "wrangler.jsonc"), "utf8"))
    expect(config.name).toBe("my-platform")
    expect(WranglerConfig.check(WranglerConfig.forEnv(config))).toEqual([])
    for (const env of ["staging", "production"]) expect(WranglerConfig.check(WranglerConfig.forEnv(config, env), { deployed: true }), env).toEqual([])
    // The dashboard and /docs: the directory the package's build writes, as the installed package has it.
    expect(config.assets).toEqual({ directory: "node_modules/@factline/workers/dist/assets", binding: "ASSETS" })
    expect(join(root, "packages/workers", config.assets.directory.replace("node_modules/@factline/workers/", ""))).toBe(Assets.outDir)
    const pkg = readJson(join(app, "package.json"))
    expect(pkg.name).toBe("my-platform")
    expect(pkg.dependencies["@factline/workers"]).toBe(readJson(join(root, "packages/workers/package.json")).version)
  })

  it("writes a .dev.vars whose local and platform tokens authenticate (as factline dev reads them) and whose secrets key is 32 bytes", async () => {
    const vars = readFileSync(join(app, ".dev.vars"), "utf8")
    const token = /# Your local token .*: (fl_[0-9A-Za-z]{43})$/m.exec(vars)[1]
    const principals = Auth.principals(/^FACTLINE_TOKENS='(.*)'$/m.exec(vars)[1])
    expect(principals.get(await Auth.sha256Hex(token))).toEqual({ tenantId: "local", scopes: ["events:write", "read", "admin"], name: "local" })
    const read = Dev.readDevVars(app)
    expect(read.tokens.map((t) => t.name)).toEqual(["local", "platform"])
    const platform = read.tokens.find((t) => t.name === "platform").token
    expect(principals.get(await Auth.sha256Hex(platform))).toEqual({ tenantId: "factline", scopes: ["platform"], name: "platform" })
    const banner = Dev.banner(read, 8787).join("\n")
    expect(banner).toContain("retries: development scale 1/60 (production unchanged)")
    expect(banner).toContain(`token platform (tenant factline; platform): ${platform}`)
    expect(Buffer.from(/^FACTLINE_SECRETS_KEY='(.*)'$/m.exec(vars)[1], "base64")).toHaveLength(32)
    expect(vars).toContain("FACTLINE_LOCAL_DEVELOPMENT='true'")
    expect(readFileSync(join(app, ".gitignore"), "utf8")).toContain(".dev.vars")
  })

  it("refuses a directory that is not empty, writing nothing", async () => {
    const dir = join(scratch, "busy")
    mkdirSync(dir)
    writeFileSync(join(dir, "notes.txt"), "mine")
    let err = ""
    expect(await Init.run([dir], { out: () => {}, err: (s) => (err += s) })).toBe(1)
    expect(err).toContain("is not empty; nothing was written")
    expect(existsSync(join(dir, "package.json"))).toBe(false)
  })

  it("ships a migration with every platform table and column as @factline/core/tables declares them", () => {
    const snapshot = readJson(join(root, "packages/workers/template/migrations/meta/0000_snapshot.json"))
    const sql = readFileSync(join(root, "packages/workers/template/migrations/0000_init.sql"), "utf8")
    for (const table of Object.values(PlatformTables).filter((t) => typeof t === "object" && t !== null && Symbol.for("drizzle:Name") in t)) {
      const { name, columns } = getTableConfig(table)
      expect(Object.keys(snapshot.tables[name]?.columns ?? {}).sort(), `${name}: run npm run template:migrations -w @factline/workers`).toEqual(columns.map((c) => c.name).sort())
    }
    for (const table of ["facts", "projection_applied", "accepted_keys", "orders"]) expect(sql).toMatch(new RegExp("CREATE TABLE `" + table + "` \\([\\s\\S]*?\\n\\) WITHOUT ROWID;"))
  })

  it("pins the tool versions the repository is tested with, and the packages move together", () => {
    const rootPkg = readJson(join(root, "package.json"))
    const template = readJson(join(root, "packages/workers/template/package.json"))
    for (const [name, version] of Object.entries(template.devDependencies)) expect(version, name).toBe(rootPkg.devDependencies[name])
    for (const name of ["effect", "drizzle-orm"]) expect(template.dependencies[name], name).toBe(rootPkg.dependencies[name])
    const versions = ["schemas", "core", "workers"].map((p) => readJson(join(root, `packages/${p}/package.json`)))
    expect(new Set(versions.map((p) => p.version)).size).toBe(1)
    const version = versions[0].version
    for (const p of versions) for (const [dep, range] of Object.entries(p.dependencies ?? {})) if (dep.startsWith("@factline/")) expect(range, `${p.name} → ${dep}`).toBe(version)
    expect(readFileSync(join(root, "CHANGELOG.md"), "utf8")).toContain(`## ${version}`)
  })

  it("one Node requirement: every package, the template and the repository declare the same engines", () => {
    const manifests = ["package.json", ...["schemas", "core", "workers", "client"].map((p) => `packages/${p}/package.json`), "packages/workers/template/package.json"]
    const engines = new Set(manifests.map((m) => readJson(join(root, m)).engines?.node))
    expect([...engines]).toEqual([">=22.13"])
  })

  it("--from TARBALLS: the app's @factline/* dependencies point at the packed tarballs; a missing one writes nothing", async () => {
    const version = readJson(join(root, "packages/workers/package.json")).version
    const tarballs = join(scratch, "tarballs")
    mkdirSync(tarballs)
    for (const p of ["schemas", "core", "workers"]) writeFileSync(join(tarballs, `factline-${p}-${version}.tgz`), "")
    let err = ""
    const partial = join(scratch, "partial")
    expect(await Init.run([partial, "--from", tarballs], { out: () => {}, err: (s) => (err += s) })).toBe(1)
    expect(err).toContain(`missing factline-client-${version}.tgz`)
    expect(existsSync(partial)).toBe(false)

    writeFileSync(join(tarballs, `factline-client-${version}.tgz`), "")
    const app = join(scratch, "apps", "packed")
    let out = ""
    expect(await Init.run([app, "--from", tarballs], { out: (s) => (out += s), err: () => {} })).toBe(0)
    expect(out).toContain("from the tarballs in")
    const deps = readJson(join(app, "package.json")).dependencies
    for (const p of ["schemas", "core", "workers", "client"]) expect(deps[`@factline/${p}`], p).toBe(`file:../../tarballs/factline-${p}-${version}.tgz`)
    expect(deps.effect).toBe(readJson(join(root, "package.json")).dependencies.effect)
  })
})
