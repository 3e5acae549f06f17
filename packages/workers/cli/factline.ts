#!/usr/bin/env node
/**
 * The `factline` command of @factline/workers: the local commands (a new app, its tokens, its deployment, a new
 * module, its migrations)
 * and the operators' commands against a deployment's HTTP API (operate.ts, through @factline/client's
 * request layer). Each command is its own module, loaded only when it runs — `npx @factline/workers init`
 * loads neither the client nor the operators' commands.
 *
 * Exit codes: 0 done, 1 the API refused or could not be reached (or a local command failed), 2 a usage error.
 */
import * as Package from "./Package.js"

/** A command of its own module: `run(argv)` resolves with the exit code. */
interface Command {
  readonly run: (argv: ReadonlyArray<string>) => Promise<number>
}

const local: Record<string, () => Promise<Command>> = {
  init: () => import("./init.js"),
  tokens: () => import("./tokens.js"),
  deploy: () => import("./deploy.js"),
  dev: () => import("./dev.js"),
  "new:module": () => import("./new-module.js"),
  "new:version": () => import("./new-version.js"),
  "db:generate": () => import("./generate.js")
}

const usage = `usage: factline <command> [options]

local commands:
  init <dir> [--from TARBALLS]              write a new factline app into <dir> (npx @factline/workers init my-platform;
                                            --from: depend on packed tarballs, npm run pack:local in the repository)
  tokens create|list|revoke …               API tokens (factline tokens --help)
  deploy [--env NAME] [--dry-run]           create queues, D1 databases, R2, apply migrations, deploy (factline deploy --help)
  new:module <name> [--app DIR] [--workflow]
                                            scaffold a module (event, handler, processor, projection, table, specs;
                                            --workflow: a workflow too), register it, generate its migration
  new:version <module> <type> [--app DIR] [--no-snapshot]
                                            the next version of a message or fact type: its schema (a copy of the
                                            latest), .version(N+1, …) with an upcaster stub, its schema snapshot
  dev [wrangler dev options]                the app's npm run dev: typecheck (a type error stops it), local migrations,
                                            the development banner, wrangler dev, the start-up and catch-up checks
  db:generate [--name N] [--rename A:B] [--create C]
                                            drizzle-kit generate without its interactive rename question

operators' commands, against a deployment (--url, --token):
  health [--window 15m|1h|6h|24h]           every queue's health (scope platform)
  dlq list [filters] [--limit N] [--cursor C]
                                            dead letters, newest first (filters: --queue --status --type --reason)
  dlq show ID                               one dead letter: failure context, history, original message
  dlq replay ID                             send it back to its queue with the same idempotency key
  dlq replay --all-matching [filters]       replay every open one matching --queue --type --reason (in waves)
  dlq skip ID --reason "…"                  give its work up (recorded as a reconciliation fact)
  dlq escalate ID [--note "…"]              mark it escalated
  runs [filters] [--follow]                 every message attempt, newest first (filters: --queue --type --outcome --subject --since);
                                            --follow prints each new or changed run every second until ctrl-c
                                            (--follow-for S: for S seconds)
  runs retry ID                             retry a waiting message now (a dead one: replay its dead letter)
  erase SUBJECT [--follow]                  erase a data subject's personal data (scope admin); --follow until it is erased
  subjects export|erasure SUBJECT           a data subject's data as JSON (the read side's), or its erasure
  workflows [list] [filters]                workflow instances, newest first (filters: --workflow --status --subject; --limit --cursor)
  workflows show ID                         one instance: status here and at Cloudflare, step, attempts, wait, facts appended
  workflows terminate|retry ID              stop an instance; run a failed or terminated one again (steps keep their keys)
  projections [catch-up]                    every projection's catch-up (current, catching_up, not_migrated); catch-up checks now (scope platform)
  batches [--status S] [--limit N]          batch jobs (imports, exports, reconciles, rebuilds) of this token's tenant
  import FILE [--name NAME] [--no-wait]     upload an NDJSON file of envelopes, import it, show progress until done (scope admin)
  export [--projection P] [--format F] [--out FILE]
                                            the tenant's facts (or a projection's rows, ndjson|csv) to FILE or stdout
  reconcile PROJECTION [--repair]           compare a projection with the ledger; --repair fixes the drifted rows
  rebuild PROJECTION                        rebuild a projection from the ledger (scope platform)
  batch show|cancel ID                      one batch job, or stop its further chunks
  recover --since 10m [--dry-run]           relay again the facts appended since then, re-send kept events not yet decided:
                                            after a restart of the local queues (scope platform)
  tenants [me]                              where every tenant's read side lives (scope platform), or this token's tenant
  tenants place TENANT --to N               place a tenant not used yet on read database N (scope platform)
  tenants remove TENANT                     remove the placement of a tenant that holds no data (scope platform)
  tenants move TENANT --to N [--projection P] [--no-wait]
                                            move a tenant's read side (or only its projection P) to read database N under live traffic, following it (scope platform)
  tenants move TENANT --projection P --parts N,N[,…] [--no-wait]
                                            split projection P of a tenant into 2, 4, 8 or 16 parts on these read databases, a row in part hash(key) mod k (scope platform)
  tenants delete TENANT [--no-wait]         delete a departed tenant's whole data from every store, following it to its report (scope platform)
  tenants reshard TENANT [--shards N] [--follow]
                                            raise a tenant's ledger shard count to N (a multiple of its count, at most 1024) under live
                                            traffic; without --shards, its latest reshard's progress; --follow until done or failed (scope platform)

options:
  --url URL       the deployment (default: $FACTLINE_URL or http://localhost:8787)
  --token TOKEN   an API token (default: $FACTLINE_TOKEN); scope admin (own tenant) or platform
  --json          print the API's JSON response
  -h, --help      this help
  -v, --version   the version of @factline/workers`

const argv = process.argv.slice(2)
const [command] = argv
const help = argv.slice(0, argv.includes("--") ? argv.indexOf("--") : undefined).some((a) => a === "--help" || a === "-h")
if (command === "--version" || command === "-v") {
  process.stdout.write(`${Package.manifest.version}\n`)
} else if (command !== undefined && Object.hasOwn(local, command)) {
  process.exitCode = await (await local[command]!()).run(argv.slice(1))
} else if (command === undefined || command === "help" || help) {
  console.log(usage)
  process.exitCode = command === undefined ? 2 : 0
} else {
  process.exitCode = await (await import("./operate.js")).run(argv)
}
