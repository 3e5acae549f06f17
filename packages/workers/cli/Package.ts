/**
 * Where @factline/workers' own files are (its package.json, the app template), for the commands that read them:
 * the same from the CLI's sources (`cli/`, as `npm run factline` runs them) and from its build (`dist/cli/`, as
 * the installed `factline` runs): the nearest folder up from this module whose package.json is @factline/workers.
 */
import { existsSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const find = (from: string): string => {
  for (let at = from; ; at = dirname(at)) {
    const file = join(at, "package.json")
    if (existsSync(file) && (JSON.parse(readFileSync(file, "utf8")) as { readonly name?: unknown }).name === "@factline/workers") return at
    if (dirname(at) === at) throw new Error(`no package.json of @factline/workers above ${from}`)
  }
}

/** The package's folder. */
export const root = find(dirname(fileURLToPath(import.meta.url)))

/** The package's package.json. */
export const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { readonly name: string; readonly version: string }

/** The app template `factline init` copies. */
export const templateDir = join(root, "template")
