#!/usr/bin/env node
/**
 * `npm run deploy [-- --env staging|production] [-- --dry-run]` in this repository: `factline deploy`
 * (packages/workers/cli/deploy.mjs) for the example app, bundled from the workspace's TypeScript sources.
 */
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { run as deploy } from "../../packages/workers/cli/deploy.mjs"

const example = join(fileURLToPath(import.meta.url), "..", "..", "..", "apps", "example", "wrangler.jsonc")

/** Runs `factline deploy` with the example's config unless --config is given. */
export const run = (argv) => {
  process.env.WRANGLER_BUILD_CONDITIONS ??= "@factline/source,workerd,worker,browser"
  return deploy(argv.some((a) => a === "--config" || a.startsWith("--config=")) ? argv : ["--config", example, ...argv])
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = await run(process.argv.slice(2))
