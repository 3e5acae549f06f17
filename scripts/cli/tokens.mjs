#!/usr/bin/env node
/**
 * `npm run tokens -- create|list|revoke …` in this repository: the `factline tokens` command of
 * @factline/workers (packages/workers/cli/tokens.mjs), exported as `run(argv)` for the operator CLI.
 * Local development: `--file apps/example/.dev.vars`.
 */
import { fileURLToPath } from "node:url"
import { run } from "../../packages/workers/cli/tokens.mjs"

export { run }

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = await run(process.argv.slice(2))
