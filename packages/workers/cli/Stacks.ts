/**
 * A defect's stack as the team reads it: frames in `wrangler dev`'s bundle (`.wrangler/tmp/dev-…/index.js:L:C`)
 * mapped through the source map wrangler writes beside it, to `src/orders/Orders.ts:12:9` — when the bundle is
 * on this machine (the stack of a local stack, read from the app's folder). Workers have no source maps at run
 * time, so the stored stack keeps the bundle's positions; a frame whose map is absent (another machine, a
 * deployment, a restarted `wrangler dev` that removed its folder) is left as it is. Node's own `SourceMap`:
 * no dependency.
 */
import { existsSync, readFileSync } from "node:fs"
import { SourceMap } from "node:module"
import { dirname, isAbsolute, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

/** A frame's position in a bundle under `.wrangler/tmp/`: its file (as written), line and column. */
const bundleFrame = /((?:file:\/\/)?[^\s()]*\.wrangler[\\/]tmp[\\/][^\s()]+?\.[cm]?js):(\d+):(\d+)/g

/** `stack` with each bundle frame whose source map is found from `cwd` replaced by its source's `path:line:column`. */
export const mapStack = (stack: string, cwd: string = process.cwd()): string => {
  const maps = new Map<string, SourceMap | undefined>()
  const mapOf = (file: string): SourceMap | undefined => {
    if (!maps.has(file)) {
      const path = `${file}.map`
      let map: SourceMap | undefined
      try {
        if (existsSync(path)) map = new SourceMap(JSON.parse(readFileSync(path, "utf8")))
      } catch {}
      maps.set(file, map)
    }
    return maps.get(file)
  }
  return stack.replace(bundleFrame, (whole, written: string, line: string, column: string) => {
    const file = written.startsWith("file://") ? fileURLToPath(written) : isAbsolute(written) ? written : resolve(cwd, written)
    const origin = mapOf(file)?.findOrigin(Number(line), Number(column))
    if (origin === undefined || !("fileName" in origin) || !origin.fileName) return whole
    const source = origin.fileName.startsWith("file://") ? fileURLToPath(origin.fileName) : resolve(dirname(file), origin.fileName)
    const shown = relative(cwd, source)
    return `${shown.startsWith("..") ? source : shown}:${origin.lineNumber}:${origin.columnNumber}`
  })
}
