// node --test scripts/check-architecture.test.mjs: the architecture check on small repositories in a temp dir.
import assert from "node:assert/strict"
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { after, test } from "node:test"
import { fileURLToPath } from "node:url"

/** The outside design document's file name, built so that this test does not cite it itself. */
const outsideDesign = ["DESIGN", "md"].join(".")
const script = join(dirname(fileURLToPath(import.meta.url)), "check-architecture.mjs")
const made = []
after(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true })
})

/** A repository of the clean files plus `files` (path -> text), checked; returns the exit status and output. */
const check = (files, ...flags) => {
  const root = mkdtempSync(join(tmpdir(), "factline-architecture-"))
  made.push(root)
  for (const [path, text] of Object.entries({ ...clean, ...files })) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  const run = spawnSync(process.execPath, [script, root, ...flags], { encoding: "utf8" })
  return { status: run.status, out: run.stdout + run.stderr }
}

/** Everything here is allowed: the composition reads env, the error module writes the body, casts at the limit. */
const clean = {
  "packages/workers/src/Services.ts": 'export const layer = (env: Env) => [env.DB, env["EVENTS_QUEUE"]]\n',
  "packages/workers/src/http/Problem.ts": "export const errorResponse = (c: any, status: number, code: string) => c.json({ error: { code } }, status)\n",
  "packages/workers/src/http/Routes.ts": [
    'import { layer } from "../Services.js"',
    "// env.DB, errorResponse(c, 500) and Date.now() in a comment do not count",
    'export const text = "env.DB errorResponse( new Date() _tag === \\"LedgerUnavailable\\""',
    "export const run = (c: { env: unknown }) => layer(c.env as never)",
    "export const ok = (outcome: { _tag: string }) => outcome._tag === \"Done\"",
    "// sql.all(Sql.statement(…)), queue.sendBatch(…) and BatchFiles.BatchFiles in a comment do not count",
    "export const calls = (c: any, Effect: any, Tokens: any) => [Effect.all([]), Tokens.run(), c.get(\"principal\"), /a/.exec(\"a\")]",
    ""
  ].join("\n"),
  "packages/core/src/ledger/Ledger.ts": [
    'import type { Shard } from "./Shard.js"',
    "export const casts = [1 as unknown as string, 2 as unknown as string, 3 as unknown as string, 4 as unknown as string, 5 as unknown as string]",
    "export const at = (ms: number) => new Date(ms).toISOString()",
    "export type Ledger = { shard: Shard }",
    ""
  ].join("\n"),
  "packages/core/src/ledger/Shard.ts": 'import type { Ledger } from "./Ledger.js"\nexport type Shard = { ledger: Ledger }\n',
  "packages/core/src/testing/Fake.ts": "export const now = () => new Date().toISOString() + Date.now()\n",
  "packages/core/src/platform/Effects.ts": 'import type { Effect, Layer } from "effect"\nimport * as Schema from "effect/Schema"\nimport * as OpenApi from "effect/http-api/OpenApi"\n// import { Schema } from "effect" in a comment does not count\nexport const text = \'import { Schema } from "effect"\'\nexport type L = Layer.Layer<Effect.Effect<1>>\nexport const s = [Schema.String, OpenApi.annotations]\n',
  "apps/shop/src/index.ts": 'import * as Effect from "effect/Effect"\nexport const e = Effect.void\n',
  "packages/core/src/ledger/Ledger.test.ts": 'import { at } from "./Ledger.js"\nexport const t = Date.now() + (process.env.X as unknown as number)\n',
  "packages/workers/src/Time.ts": "export const now = () => Date.now()\n",
  "packages/core/src/platform/Time.ts": "export const now = () => new Date(Date.now()).toISOString()\n",
  "packages/core/src/platform/Storage.ts": "export interface Bucket { put(key: string): Promise<void> }\nexport const make = (bucket: Bucket) => ({ put: (key: string) => bucket.put(key) })\n",
  "packages/core/src/testing/MemoryBindings.ts": 'import type { Bucket } from "../platform/Storage.js"\nexport class MemoryBucket implements Bucket { async put() {} }\n',
  "packages/workers/src/Env.ts": "export interface Env { readonly PAYLOADS: R2Bucket; readonly EVENTS_QUEUE: Queue }\n",
  "packages/core/src/platform/Queues.ts": "export type QueueBinding = Pick<Queue, \"sendBatch\">\nexport const send = (queue: QueueBinding, messages: Array<MessageSendRequest>) => queue.sendBatch(messages)\n",
  "packages/core/src/testing/CountingBindings.ts": "export const queue = (q: Queue): Queue => ({ send: (b: unknown) => q.send(b), sendBatch: (m: any) => q.sendBatch(m) }) as Queue\n",
  "packages/core/src/relay/Relay.ts": "// queue.sendBatch(messages) and Queue<T> in a comment do not count\nexport const f = (queues: any, messages: Array<unknown>) => queues.send(\"factline-projections\", messages)\n",
  "packages/core/src/archive/Archive.ts": "// bucket.put(key) and R2Bucket in a comment do not count\nexport const f = (storage: any, payloads: any) => [storage.put(\"k\"), storage.list(\"p/\"), payloads.get(\"t\", \"r\")]\n",
  "packages/workers/src/http/Serve.ts": "export const admit = (request: Request) => [readJson(request), new URL(request.url).searchParams.get(\"x\"), request.headers.get(\"authorization\")]\n",
  "packages/workers/src/http/Events.ts": "export const accept = async (request: Request) => isObject(await request.json()) && request.headers.get(\"content-type\")\n",
  "docs/architecture.md": "# Architecture\n\nThe design as built; DESIGN_NOTES and designs do not count.\n",
  "README.md": "# shop\n\nSee [the architecture](docs/architecture.md).\n"
}

test("a clean repository passes, and the type-only circle is reported, not failed", () => {
  const { status, out } = check({})
  assert.equal(status, 0, out)
  assert.match(out, /all \d+ rules within their limits/)
  assert.match(out, /^ok +citations of DESIGN\.md +0 +0$/m)
  assert.match(out, /^ok +as unknown as +5 +5$/m)
  assert.match(out, /^ok +SQL, queue sends, R2 under http\/ +0 +0$/m)
  assert.match(out, /^ok +hand-parsed inputs under http\/ +0 +0$/m)
  assert.match(out, /^ok +raw R2 calls outside platform\/ +0 +0$/m)
  assert.match(out, /^ok +raw Queue use outside platform\/ +0 +0$/m)
  assert.match(out, /^info +import circles \(type-only\) +1 +-$/m)
  assert.match(out, /packages\/core\/src\/ledger\/Ledger\.ts:1 import type \.\/Shard\.js -> packages\/core\/src\/ledger\/Shard\.ts:1 import type \.\/Ledger\.js/)
  assert.match(out, /^info +non-test source lines/m)
})

const violations = {
  "env reads outside the composition": ["packages/workers/src/Platform.ts", "export const f = (env: Env) => 1\nexport const g = (env: Env) => env.DB\n", 2],
  "env imported from cloudflare:workers": ["packages/workers/src/Platform.ts", 'export const a = 1\nimport { env as workerEnv } from "cloudflare:workers"\n', 2],
  "env reads, by index": ["packages/workers/src/http/Queues.ts", 'export const f = (c: any) => c.env["DLQ"]\n', 1],
  "errorResponse-style call sites": ["packages/workers/src/http/Facts.ts", 'import { errorResponse } from "./Errors.js"\nexport const f = (c: any) => errorResponse(c, 404, "not_found")\n', 2],
  "error bodies by hand": ["packages/workers/src/http/Auth.ts", 'export const f = (c: any) =>\n  c.json({ error: { code: "forbidden" } }, 403)\n', 2],
  "_tag string matches on errors": ["packages/core/src/relay/Relay.ts", 'export const f = (e: { _tag: string }) =>\n  e._tag === "PayloadStoreUnavailable"\n', 2],
  "_tag of a Result": ["packages/workers/src/http/Events.ts", 'export const f = (r: { _tag: string }) => "Failure" !== r._tag\n', 1],
  "_tag switch": ["packages/workers/src/http/Webhooks.ts", 'export const f = (e: { _tag: string }) => {\n  switch (e._tag) {\n    case "Other": return 1\n    case "WebhookNotFound": return 404\n  }\n}\n', 4],
  "a declared TaggedError's tag": [
    "packages/core/src/projections/Rebuild.ts",
    'export class RebuildRefused extends Schema.TaggedError<RebuildRefused>()("RebuildRefused", {}) {}\nexport const f = (e: { _tag: string }) => e._tag !== "RebuildRefused"\n',
    2
  ],
  "Date.now / new Date in core": ["packages/core/src/batch/Jobs.ts", "export const a = 1\nexport const now = () => new Date().toISOString()\n", 2],
  "Date.now in core": ["packages/core/src/batch/Ids.ts", "export const id = () => `b_${Date.now()}`\n", 1],
  "as unknown as": ["packages/client/src/Client.ts", "export const x = 6 as unknown as string\n", 1],
  "import circles (value imports)": ["packages/client/src/A.ts", 'import { b } from "./B.js"\nexport const a = () => b\n', 1, { "packages/client/src/B.ts": 'import { a } from "./A.js"\nexport const b = () => a\n' }],
  "import circles, an inline type import is a value import": ["packages/client/src/A.ts", 'import { type B } from "./B.js"\nexport type A = B\n', 1, { "packages/client/src/B.ts": 'import { a } from "./A.js"\nexport type B = typeof a\n' }],
  "value imports from effect barrels": ["packages/core/src/batch/Jobs.ts", 'import type { Layer } from "effect"\nimport { Effect, type Schema } from "effect"\nimport * as Option from "effect/Option"\n', 2],
  "value imports from effect barrels, in an app": ["apps/shop/src/orders/Orders.ts", 'import * as Effect from "effect/Effect"\nimport {\n  HttpApiSchema\n} from "effect/http-api"\n', 2],
  "value imports from effect barrels, in the template": ["packages/workers/template/src/orders/Orders.ts", 'import * as Schema from "effect"\n', 1],
  "whole libraries in the Worker: hyparquet-writer's writer beside a leaf module": ["packages/core/src/archive/Parquet.ts", 'import { serializeTCompactProtocol } from "hyparquet-writer/src/thrift.js"\nimport { parquetWriteBuffer } from "hyparquet-writer/src/write.js"\n', 2],
  "whole libraries in the Worker: hyparquet's index in the template": ["packages/workers/template/src/orders/Orders.ts", 'import { parquetReadObjects } from "hyparquet"\n', 1],
  "whole libraries in the Worker: Drizzle's D1 driver in an app": ["apps/shop/src/orders/Orders.ts", 'export const a = 1\nimport { drizzle } from "drizzle-orm/d1"\n', 2],
  [`citations of ${outsideDesign}, in a docs page`]: ["docs/queues.md", `# Queues\n\nThe policy table of ${outsideDesign}, as data.\n`, 3],
  [`citations of ${outsideDesign}, in a code comment`]: ["packages/schemas/src/Envelope.ts", `/**\n * Field rules follow ${outsideDesign.split(".")[0]} "Message contract".\n */\nexport const a = 1\n`, 2],
  [`citations of ${outsideDesign}, in the README`]: ["README.md", `# shop\n(see ${outsideDesign})\n`, 2],
  "SQL under http/": ["packages/workers/src/http/Tenants.ts", 'export const a = 1\nexport const f = (platform: any) => platform.all(Sql.statement("SELECT * FROM tenant_placements"))\n', 2],
  "a statement object under http/": ["packages/workers/src/http/Facts.ts", 'export const f = (store: any, key: string) =>\n  store.query({ sql: "SELECT 1 FROM accepted_keys WHERE idempotency_key = ?", params: [key] })\n', 2],
  "a queue send under http/": ["packages/workers/src/http/Webhooks.ts", 'export const f = (queues: any, messages: any) =>\n  queues.send("factline-webhooks", messages)\n', 2],
  "a batch chunk sent from http/": ["packages/workers/src/http/Batches.ts", 'import { BatchConsumer } from "@factline/core"\nexport const f = (first: any) => BatchConsumer.send(first)\n', 2],
  "an R2 door under http/": ["packages/workers/src/http/Batches.ts", 'import { BatchFiles } from "@factline/core"\nexport const files = Effect.service(BatchFiles.BatchFiles)\n', 2],
  "hand-parsed inputs under http/": ["packages/workers/src/http/Facts.ts", 'export const a = 1\nexport const f = (c: any) => [c.req.query("limit"), c.req.param("id")!]\n', 2],
  "a body read by hand under http/": ["packages/workers/src/http/Webhooks.ts", 'export const f = async (request: Request) =>\n  isObject(await request.json())\n', 2],
  "a query parameter read by hand under http/": ["packages/workers/src/http/Runs.ts", 'export const f = (url: URL) => url.searchParams.get("cursor")\n', 1],
  "raw R2 calls outside platform/": ["packages/core/src/batch/Files.ts", 'export const a = 1\nexport const f = (bucket: any) => bucket.list({ prefix: "p/" })\n', 2],
  "a raw R2 call on a …Bucket": ["packages/workers/src/LedgerShard.ts", "export const f = async (payloadBucket: any) =>\n  (await payloadBucket.get(\"k\"))?.text()\n", 2],
  "a module taking the raw bucket": ["packages/core/src/producing/Kept.ts", 'import type { Bucket } from "../platform/Bindings.js"\nexport const a = 1\n', 1],
  "the raw R2Bucket type outside platform/": ["packages/workers/src/Shard.ts", "export const a = 1\nexport const f = (r2: R2Bucket) => r2\n", 2],
  "raw Queue use outside platform/": ["packages/core/src/relay/Outbox.ts", "export const a = 1\nexport const f = (target: any, messages: any) => target.sendBatch(messages)\n", 2],
  "a send on a raw queue binding": ["packages/workers/src/LedgerShard.ts", "export const f = (eventsQueue: any, body: unknown) =>\n  eventsQueue.send(body)\n", 2],
  "a module taking the raw Queue type": ["packages/core/src/consuming/DeadLetters.ts", "export const a = 1\nexport const make = (dlq: (name: string) => Queue | undefined) => dlq\n", 2],
  "the raw queue lookup outside platform/": ["packages/workers/src/Shard.ts", "export const a = 1\nexport const q = Effect.service(Bindings.QueueBindings)\n", 2],
  "a queue door under http/": ["packages/workers/src/http/Runs.ts", 'import { Queues } from "@factline/core/runtime"\nexport const q = Effect.service(Queues.Queues)\n', 2],
  "the PAYLOADS binding outside the composition": ["packages/workers/src/Relay.ts", "export const a = 1\nexport const f = (e: any) => e.PAYLOADS\n", 2],
  "product-entry namespaces of core": ["packages/core/src/index.ts", Array.from({ length: 26 }, (_, i) => `export * as N${i} from "./n${i}.js"\n`).join(""), 26],
  "runtime entry outside workers": ["apps/shop/src/orders/Orders.ts", 'export const a = 1\nimport { Sql } from "@factline/core/runtime"\n', 2],
  "runtime entry in the template": ["packages/workers/template/src/orders/Orders.ts", 'export type { Sql } from "@factline/core/runtime"\n', 1],
  "runtime entry in another package": ["packages/client/src/Client.ts", 'export const a = 1\nexport const b = 2\nexport const load = () => import("@factline/core/runtime")\n', 3],
  "folder cycles in core": [
    "packages/core/src/definitions/Def.ts",
    'import type { Reg } from "../registry/Reg.js"\nexport type Def = Reg\n',
    1,
    { "packages/core/src/registry/Reg.ts": 'export type Reg = 1\nimport type { Def } from "../definitions/Def.js"\nexport type R = Def\n' }
  ]
}

for (const [rule, [path, text, line, more]] of Object.entries(violations)) {
  test(`${rule}: one violation fails and names ${path}:${line}`, () => {
    const { status, out } = check({ [path]: text, ...more })
    assert.equal(status, 1, out)
    assert.match(out, /^architecture: 1 of \d+ rules over their limit/m)
    assert.ok(out.includes(`   ${path}:${line}  `), `expected ${path}:${line} in\n${out}`)
    const { status: reported } = check({ [path]: text, ...more }, "--report")
    assert.equal(reported, 0)
  })
}

test("the _tag hits print the literal, and other tags are listed as not counted", () => {
  const { out } = check({ "packages/core/src/relay/Relay.ts": 'export const f = (e: { _tag: string }) => e._tag === "LedgerUnavailable"\n' })
  assert.match(out, /packages\/core\/src\/relay\/Relay\.ts:1 {2}_tag === "LedgerUnavailable"/)
  assert.match(out, /not counted \(not an error's tag\): "Done" 1/)
})

test("the product entry's namespaces are counted up to the limit, and the runtime entry is allowed in workers, tests and the bench", () => {
  const { status, out } = check({
    "packages/core/src/index.ts": `/** export * as Comment from "./c.js" does not count */\n${Array.from({ length: 24 }, (_, i) => `export * as N${i} from "./n${i}.js"\n`).join("")}export * from "./all.js"\nexport { PermanentError } from "./f.js"\n`,
    "packages/workers/src/Platform.ts": 'import { Sql } from "@factline/core/runtime"\nexport const s = Sql\n',
    "packages/core/src/index.test.ts": 'import { Sql } from "@factline/core/runtime"\nexport const s = Sql\n',
    "apps/shop/test/ledger.workers.test.ts": 'import { Sql } from "@factline/core/runtime"\nexport const s = Sql\n',
    "apps/shop/src/orders/Orders.ts": '// import { Sql } from "@factline/core/runtime" in a comment does not count\nimport { Module } from "@factline/core"\nexport const m = Module\n'
  })
  assert.equal(status, 0, out)
  assert.match(out, /^ok +product-entry namespaces of core +25 +25$/m)
  assert.match(out, /packages\/core\/src\/index\.ts:2 {2}N0 \(\.\/n0\.js\)/)
  assert.match(out, /packages\/core\/src\/index\.ts:26 {2}\* \(\.\/all\.js\)/)
  assert.match(out, /^ok +runtime entry outside workers +0 +0$/m)
})

test("an allowed file that does not exist is noted", () => {
  const { out } = check({ "packages/workers/src/Services.ts": "export {}\n", "packages/workers/src/LoadTimeEnv.ts": "export {}\n" }, "--report")
  assert.doesNotMatch(out, /composition file .* does not exist/)
  const root = mkdtempSync(join(tmpdir(), "factline-architecture-"))
  made.push(root)
  mkdirSync(join(root, "packages/core/src"), { recursive: true })
  writeFileSync(join(root, "packages/core/src/index.ts"), "export {}\n")
  const run = spawnSync(process.execPath, [script, root], { encoding: "utf8" })
  assert.equal(run.status, 0, run.stdout)
  assert.match(run.stdout, /composition file packages\/workers\/src\/Services\.ts does not exist/)
})

test("files over 300 lines and functions over 100 lines are listed with their size, a 100-line function is not", () => {
  const body = (n) => Array.from({ length: n - 2 }, (_, i) => `  const v${i} = ${i}`).join("\n")
  const { status, out } = check({
    "packages/core/src/ledger/Big.ts": `export const make = (x: number) => {\n${body(101)}\n}\nexport function fold(a: number) {\n${body(100)}\n}\n`,
    "packages/core/src/ledger/Long.ts": Array.from({ length: 301 }, (_, i) => `export const c${i} = ${i}`).join("\n") + "\n",
    "packages/core/src/ledger/Short.ts": Array.from({ length: 300 }, (_, i) => `export const c${i} = ${i}`).join("\n") + "\n"
  })
  // The ratchet is at 0 since every function over 100 lines was cut: the one here fails the check.
  assert.equal(status, 1, out)
  assert.match(out, /^FAIL +functions over 100 lines +1 +0$/m)
  assert.match(out, /packages\/core\/src\/ledger\/Big\.ts:1 {2}make: 101 lines/)
  assert.doesNotMatch(out, /fold: 100 lines/)
  assert.match(out, /^ok +source files over 300 lines +1 +\d+$/m)
  assert.match(out, /packages\/core\/src\/ledger\/Long\.ts:1 {2}301 lines/)
  assert.doesNotMatch(out, /Short\.ts:1/)
  assert.match(out, /the target is 8 \(issue 36\)/)
})

test("undecoded row casts: reads with a type argument and casts right after a read are listed, one per line; schema reads and declarations are not", () => {
  const { out } = check({
    "packages/core/src/ledger/Rows.ts": [
      "export const a = 1",
      'export const count = (sql: any) => sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM facts").one().n',
      "export const facts = (sql: any) =>",
      "  sql",
      "    .exec<FactRow & { outbox_id: number; tags: Array<Map<string, number>> }>(\"SELECT * FROM outbox\")",
      "    .toArray()",
      'export const d1 = async (db: any) => (await db.prepare("SELECT 1").all<Record<string, unknown>>()).results',
      'export const first = (db: any) => db.prepare("SELECT 1 AS n").first<number>("n")',
      'export const raw = (statement: any) => statement.raw<[string]>()',
      'export const cast = async (statement: any) => (await statement.all()).results as Array<FactRow>',
      'export const one = (sql: any) => sql.exec("SELECT 1 AS n").one() as { n: number }',
      'export const listed = (cursor: any) => cursor.toArray()[0] as FactRow',
      ""
    ].join("\n"),
    "packages/core/src/consuming/Inbox.ts": [
      "// sql.exec<FactRow>(…) and .all() as Row in a comment do not count",
      'export const text = "db.prepare(s).all<Row>()"',
      "export const rows = (sql: any, Row: any, s: any) => [sql.all(Row, s), sql.first(Row, s), sql.batch([s], Row)]",
      "export const exec = (sql: any) => sql.exec(\"SELECT 1\").toArray() as unknown",
      "export const tuple = (r: any) => r.results as const",
      "export class Statement { async all<T = Record<string, unknown>>(): Promise<Array<T>> { return [] } raw<T>(): Array<T> { return [] } }",
      ""
    ].join("\n")
  }, "--report")
  assert.match(out, /^(ok|FAIL) +undecoded row casts +8 +\d+$/m)
  for (const line of [2, 5, 7, 8, 9, 10, 11, 12]) assert.ok(out.includes(`   packages/core/src/ledger/Rows.ts:${line}  `), `expected Rows.ts:${line} in\n${out}`)
  assert.doesNotMatch(out, /packages\/core\/src\/consuming\/Inbox\.ts:\d/)
  const casts = Array.from({ length: 17 }, (_, i) => `export const n${i} = (sql: any) => sql.exec<{ n: number }>("SELECT ${i} AS n").one().n\n`).join("")
  const over = check({ "packages/core/src/ledger/Rows.ts": casts })
  assert.equal(over.status, 1, over.out)
  assert.match(over.out, /^FAIL +undecoded row casts +17 +\d+$/m)
})
