#!/usr/bin/env node
/**
 * The `factline` command of @factline/workers:
 *   npx @factline/workers init <dir>     a new app on the published packages
 *   factline tokens create|list|revoke   API tokens (FACTLINE_TOKENS)
 *   factline deploy [--env E] [--dry-run] provision every resource and deploy with wrangler
 */
import { readFileSync } from "node:fs"

const commands = {
  init: () => import("./init.mjs"),
  tokens: () => import("./tokens.mjs"),
  deploy: () => import("./deploy.mjs")
}

const [command, ...rest] = process.argv.slice(2)
if (command === "--version" || command === "-v") {
  process.stdout.write(`${JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version}\n`)
} else if (command === undefined || !(command in commands)) {
  process.stderr.write(`usage: factline <command>

  init <dir>                        write a new factline app into <dir> (npx @factline/workers init my-platform)
  tokens create|list|revoke …       manage API tokens (factline tokens --help)
  deploy [--env NAME] [--dry-run]   create queues, D1, R2, apply migrations, deploy (factline deploy --help)
`)
  process.exitCode = command === undefined || command === "--help" || command === "help" ? 0 : 1
} else {
  process.exitCode = await (await commands[command]()).run(rest)
}
