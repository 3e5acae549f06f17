#!/usr/bin/env node
/**
 * Builds the static assets of @factline/workers into `dist/assets/` — the directory an app's wrangler.jsonc
 * names under `assets` (Workers Static Assets):
 *
 *   _headers                    the pages' security headers (public/_headers)
 *   dashboard.html, docs.html   served at /dashboard and /docs (html_handling drops the extension)
 *   static/dashboard.css
 *   static/dashboard.js         src/main.ts and its modules, bundled and minified (esbuild)
 *   static/docs.js              src/docs.ts: mounts Scalar on /docs
 *   static/scalar/standalone.js the pinned @scalar/api-reference browser bundle, copied as it is
 *
 * It does not typecheck (the package's `typecheck` runs `tsc -p dashboard`). The directory is replaced as a
 * whole (built beside it, then swapped), so a stale file never survives a build and a reader never sees
 * half of one. `node dashboard/build.mjs`, or `import { build }` (the example's tests and dev stack call it
 * so that what they serve is the current source).
 */
import { build as esbuild } from "esbuild"
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const packageDir = join(here, "..")
/** Where the assets are built: the published package ships it (`files`: dist). */
export const outDir = join(packageDir, "dist", "assets")

/** The @scalar/api-reference package this one pins (devDependencies), found the way Node would resolve it. */
const scalarPackage = () => {
  const pinned = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")).devDependencies?.["@scalar/api-reference"]
  for (let dir = packageDir; ; dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", "@scalar", "api-reference")
    if (existsSync(join(candidate, "package.json"))) {
      const { version } = JSON.parse(readFileSync(join(candidate, "package.json"), "utf8"))
      if (version !== pinned) throw new Error(`@scalar/api-reference ${version} is installed, but @factline/workers pins ${pinned}: run npm install`)
      return { dir: candidate, version }
    }
    if (dirname(dir) === dir) throw new Error("@scalar/api-reference is not installed (a devDependency of @factline/workers): run npm install")
  }
}

export const build = async () => {
  const scalar = scalarPackage()
  const unique = `${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  const staging = `${outDir}.${unique}.tmp`
  rmSync(staging, { recursive: true, force: true })
  mkdirSync(join(staging, "static", "scalar"), { recursive: true })
  cpSync(join(here, "public", "_headers"), join(staging, "_headers"))
  cpSync(join(here, "public", "dashboard.html"), join(staging, "dashboard.html"))
  cpSync(join(here, "public", "docs.html"), join(staging, "docs.html"))
  cpSync(join(here, "public", "dashboard.css"), join(staging, "static", "dashboard.css"))
  cpSync(join(scalar.dir, "dist", "browser", "standalone.js"), join(staging, "static", "scalar", "standalone.js"))
  await esbuild({
    entryPoints: { dashboard: join(here, "src", "main.ts"), docs: join(here, "src", "docs.ts") },
    outdir: join(staging, "static"),
    bundle: true,
    format: "iife",
    target: "es2022",
    platform: "browser",
    // @factline/client (its Api: the client derived from @factline/core/api) and what it imports from the workspace are bundled from
    // their TypeScript sources, as every workspace tool reads them (scripts/WorkspaceSources.mjs): the page is
    // built from the same source as the CLI runs, whether or not the packages' dist/ is built or current.
    conditions: ["@factline/source"],
    minify: true,
    legalComments: "none",
    logLevel: "warning"
  })
  const previous = `${outDir}.${unique}.old`
  try {
    renameSync(outDir, previous)
  } catch (error) {
    if (error.code !== "ENOENT") throw error
  }
  try {
    renameSync(staging, outDir)
  } catch (error) {
    // Another build (from the same sources) swapped its directory in first: keep that one.
    if (error.code !== "ENOTEMPTY" && error.code !== "EEXIST") throw error
    rmSync(staging, { recursive: true, force: true })
  }
  rmSync(previous, { recursive: true, force: true })
  return { outDir, scalarVersion: scalar.version }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const started = Date.now()
  const { outDir: dir, scalarVersion } = await build()
  console.log(`dashboard and /docs assets (Scalar ${scalarVersion}) built into ${dir} in ${Date.now() - started} ms`)
}
