/**
 * Where a defect happened in the team's code, for a spec's failure message: the first frame of the defect's
 * stack that is neither a dependency's (anything under `node_modules`: effect, `@factline/core` in an app) nor
 * this package's own sources (their tests excepted) nor Node's — shown relative to the working directory,
 * `src/orders/Orders.ts:12:9`. In a spec the stack already names the TypeScript source (vitest maps it);
 * `factline dlq show` maps a Worker bundle's stack the same way (packages/workers/cli/Stacks.ts). Nothing
 * found (a stack of framework frames only) gives `undefined`, and the message stays as it was.
 */

/** `at name (path:line:column)` or `at path:line:column`: the path, line and column of one frame. */
const frame = /^\s*at (?:.*?\()?((?:file:\/\/)?[^\s()]+?):(\d+):(\d+)\)?\s*$/
const ownSources = new URL("..", (import.meta as ImportMeta & { readonly url: string }).url).pathname
const isTest = /\.(?:test|spec)\.[cm]?[jt]sx?$/

const cwd = (): string | undefined => (globalThis as { readonly process?: { readonly cwd?: () => string } }).process?.cwd?.()

/** The team's first frame in `stack`, as `path:line:column` (relative to `base` when under it). */
export const teamLocation = (stack: string | undefined, base: string | undefined = cwd()): string | undefined => {
  for (const line of (stack ?? "").split("\n")) {
    const match = frame.exec(line)
    if (match === null) continue
    const path = match[1]!.replace(/^file:\/\//, "")
    if (path.startsWith("node:") || path.includes("/node_modules/") || !path.startsWith("/") && !/^[A-Za-z]:/.test(path)) continue
    if (path.startsWith(ownSources) && !isTest.test(path)) continue
    const root = base === undefined ? undefined : base.endsWith("/") ? base : `${base}/`
    const shown = root !== undefined && path.startsWith(root) ? path.slice(root.length) : path
    return `${shown}:${match[2]}:${match[3]}`
  }
  return undefined
}
