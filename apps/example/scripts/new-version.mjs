#!/usr/bin/env node
// `npm run new:version -- <module> <type>`: the next version of a message or fact type of the example app —
// `factline new:version --app apps/example` (packages/workers/cli/new-version.ts, the command an app made with
// `factline init` runs as `npm run new:version`), on the workspace's sources. It copies the latest schema into
// `<Name>V<N+1>`, appends `.version(N+1, …)` with an upcaster stub and writes the new version's snapshot.
import { spawnSync } from "node:child_process"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const app = join(dirname(fileURLToPath(import.meta.url)), "..")
const root = join(app, "..", "..")
const run = spawnSync(process.execPath, [
  "--conditions=@factline/source", "--import", join(root, "scripts", "NodeSources.mjs"),
  join(root, "packages", "workers", "cli", "factline.ts"), "new:version", "--app", app, ...process.argv.slice(2)
], { stdio: "inherit" })
process.exit(run.status ?? 1)
