#!/usr/bin/env node
/**
 * `npm run pack:local [-- --out DIR]`: the four packages as npm would publish them — @factline/schemas, core,
 * workers and client — built and packed into DIR (default ./tarballs), for an app outside this repository
 * before they are published: `npm run -s factline -- init ../my-platform --from ./tarballs` (see docs/own-app.md;
 * `npx --package ./tarballs/factline-workers-<version>.tgz factline init` cannot: npx fetches the workers
 * package's @factline/client from the registry, a 404 until it is published). Prints the tarballs it wrote.
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, readdirSync, rmSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

export const packages = ["@factline/schemas", "@factline/core", "@factline/workers", "@factline/client"]
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")

/** Builds and packs the packages into `out` (emptied of earlier factline tarballs first); the file names. */
export const pack = (out, { quiet = false } = {}) => {
  const npm = (args) => {
    const run = spawnSync("npm", args, { cwd: root, encoding: "utf8", stdio: quiet ? "pipe" : ["ignore", "pipe", "inherit"], maxBuffer: 64 * 1024 * 1024 })
    if (run.status !== 0) throw new Error(`npm ${args.join(" ")} exited ${run.status}\n${run.stdout ?? ""}${run.stderr ?? ""}`.slice(-6000))
    return run.stdout
  }
  npm(["run", "-s", "build"])
  mkdirSync(out, { recursive: true })
  for (const file of readdirSync(out)) if (/^factline-(schemas|core|workers|client)-.*\.tgz$/.test(file)) rmSync(join(out, file))
  npm(["pack", "--silent", "--pack-destination", out, ...packages.flatMap((p) => ["-w", p])])
  const written = readdirSync(out).filter((f) => /^factline-(schemas|core|workers|client)-.*\.tgz$/.test(f)).sort()
  if (written.length !== packages.length) throw new Error(`expected ${packages.length} tarballs in ${out}, found ${written.join(", ")}`)
  return written
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2)
  const at = args.indexOf("--out")
  const out = resolve(at >= 0 ? args[at + 1] : join(root, "tarballs"))
  const written = pack(out)
  const here = relative(process.cwd(), out) || "."
  const shown = here.startsWith(".") || here.startsWith("/") ? here : `./${here}`
  process.stdout.write(`${written.map((f) => `${shown}/${f}`).join("\n")}

a new app on these tarballs (outside this repository):
  npm run -s factline -- init ../my-platform --from ${shown}
  cd ../my-platform && npm install && npm test
`)
}
