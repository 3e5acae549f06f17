#!/usr/bin/env node
// `npm run asyncapi [-- <file>]`: writes the example platform's AsyncAPI 3 document (default
// apps/example/asyncapi.json) — the same document the Worker serves at GET /asyncapi.json, generated from the
// registry of `apps/example/src/modules.ts` and the policy table. Bundles a tiny entry with esbuild (the
// sources are TypeScript), runs it, and writes the JSON.
import { build } from "esbuild"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const out = resolve(process.argv[2] ?? join(root, "apps", "example", "asyncapi.json"))
const dir = mkdtempSync(join(tmpdir(), "factline-asyncapi-"))
try {
  const entry = join(dir, "entry.ts")
  writeFileSync(entry, `
    import { Registry } from "@factline/core"
    import { AsyncApi } from "@factline/core/runtime"
    import { modules } from ${JSON.stringify(join(root, "apps", "example", "src", "modules.ts"))}
    export const document = AsyncApi.generate(Registry.make(modules))
  `)
  const bundle = join(dir, "entry.mjs")
  await build({
    entryPoints: [entry], bundle: true, platform: "node", format: "esm", outfile: bundle, logLevel: "error",
    conditions: ["@factline/source"], nodePaths: [join(root, "node_modules")], absWorkingDir: root
  })
  const { document } = await import(pathToFileURL(bundle).href)
  writeFileSync(out, `${JSON.stringify(document, null, 2)}\n`)
  const channels = Object.keys(document.channels).length
  const messages = Object.keys(document.components.messages).length
  console.log(`wrote ${out}: AsyncAPI ${document.asyncapi}, ${channels} channels, ${messages} messages, ${Object.keys(document.components.schemas).length} schemas`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
