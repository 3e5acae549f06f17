/**
 * `factline db:generate [--name NAME] [--rename OLD:NEW]… [--create NAME]…`: `drizzle-kit generate`, never
 * interactive. drizzle-kit asks "created or renamed?" on a terminal whenever a table or column disappears while
 * another appears, and without one it crashes; here that question is answered from the command line
 * (DrizzleAnswers.cjs, preloaded into drizzle-kit): `--rename leads.score:leads.rank` keeps the data,
 * `--create leads.rank` makes a new column (dropping the old one). An unanswered question stops it with exit 3,
 * nothing written, and both commands to choose from.
 *
 * It runs where the nearest drizzle.config.ts is (the current directory or above; `--config` to choose) with
 * that project's drizzle-kit, and says which migration it wrote. `new:module` generates its migration with it.
 */
import { spawnSync } from "node:child_process"
import { existsSync, readdirSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as Args from "./Args.js"
import { type Io, stdio } from "./Io.js"

export const usage = `usage: factline db:generate [--name NAME] [--rename OLD:NEW]… [--create NAME]… [--config FILE]

  drizzle-kit generate, without its interactive questions: a migration in the config's out folder
  (migrations/) for what changed in your tables.

  --name NAME        the migration's name (migrations/00NN_NAME.sql)
  --rename OLD:NEW   a table (leads:prospects) or column (leads.score:leads.rank) renamed: its data is kept
  --create NAME      a table or column (leads.rank) that is new although another disappeared: that one is dropped
  --config FILE      drizzle-kit's config (default: the nearest drizzle.config.ts, here or above)

  exit 0 generated (or no change), 3 drizzle-kit asked a question the options do not answer (nothing written), 1 failed`

// Beside this module: DrizzleAnswers.cts in the sources (Node strips its types), DrizzleAnswers.cjs once built.
const answers = fileURLToPath(new URL(import.meta.url.endsWith(".ts") ? "./DrizzleAnswers.cts" : "./DrizzleAnswers.cjs", import.meta.url).href)

/** The nearest drizzle.config.ts from `dir` up. */
export const findConfig = (dir: string): string | undefined => {
  for (let at = resolve(dir); ; at = dirname(at)) {
    if (existsSync(join(at, "drizzle.config.ts"))) return join(at, "drizzle.config.ts")
    if (dirname(at) === at) return undefined
  }
}

/**
 * Runs drizzle-kit generate; `{ status, output, migration }` — `migration`: the path of the .sql file it wrote
 * (relative to `cwd`), if any.
 */
export const generate = ({ cwd = process.cwd(), config, name, renames = [], creates = [] }: {
  readonly cwd?: string
  readonly config?: string | undefined
  readonly name?: string | undefined
  readonly renames?: ReadonlyArray<ReadonlyArray<string>>
  readonly creates?: ReadonlyArray<string>
}): { readonly status: number; readonly output: string; readonly migration?: string | undefined } => {
  const file = config ? resolve(cwd, config) : findConfig(cwd)
  if (!file || !existsSync(file)) return { status: 1, output: `db:generate: no drizzle.config.ts in ${cwd} or above (pass --config)\n` }
  const project = dirname(file)
  let bin
  try {
    bin = join(dirname(createRequire(join(project, "package.json")).resolve("drizzle-kit")), "bin.cjs")
  } catch {
    return { status: 1, output: `db:generate: drizzle-kit is not installed in ${project} (npm install -D drizzle-kit)\n` }
  }
  const out = join(project, "migrations")
  const before = new Set(existsSync(out) ? readdirSync(out) : [])
  const run = spawnSync(process.execPath, ["--require", answers, bin, "generate", "--config", file, ...(name ? ["--name", name] : [])], {
    cwd: project,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, FACTLINE_DRIZZLE_ANSWERS: JSON.stringify({ renames, creates }) }
  })
  const output = `${run.stdout ?? ""}${run.stderr ?? ""}`
  const written = /migration file ➜ (\S+\.sql)/.exec(output)?.[1]
  const added = existsSync(out) ? readdirSync(out).filter((f) => f.endsWith(".sql") && !before.has(f)) : []
  const migration = written ? relative(cwd, join(project, written)) : added[0] ? relative(cwd, join(out, added[0])) : undefined
  return { status: run.status ?? 1, output, migration }
}

export const run = async (argv: ReadonlyArray<string>, io: Io = stdio): Promise<number> => {
  let parsed
  try {
    parsed = Args.parse(argv, { values: ["name", "config"], multiples: ["rename", "create"], positionals: false })
  } catch (error) {
    if (!(error instanceof Args.ArgsError)) throw error
    io.err(`db:generate: ${error.message}\n${usage}\n`)
    return 2
  }
  const { options } = parsed
  if (options.help) {
    io.out(`${usage}\n`)
    return 0
  }
  const renames = (options.rename ?? []).map((pair) => pair.split(":"))
  const bad = renames.find((pair) => pair.length !== 2 || !pair[0] || !pair[1])
  if (bad) {
    io.err(`db:generate: --rename ${bad.join(":")}: expected OLD:NEW (leads:prospects, or leads.score:leads.rank)\n`)
    return 2
  }
  const result = generate({ config: options.config, name: options.name, renames, creates: options.create ?? [] })
  io[result.status === 0 ? "out" : "err"](result.output)
  return result.status === 0 ? 0 : result.status === 3 ? 3 : 1
}
