// Where the bench's Worker bundle's bytes are (issue 41): the minified bytes each source package puts into the
// output, read from esbuild's metafile (`wrangler deploy --dry-run --metafile FILE`, `bytesInOutput`). Raw bytes,
// not gzip — a share, for a regression's first look; docs/performance.md (bundle size) says how to go further.

/** The package a metafile input belongs to: `name` or `@scope/name` under node_modules, `@factline/<dir>` under packages/, else `app`. */
export const packageOf = (input) => {
  const parts = input.split("/")
  const modules = parts.lastIndexOf("node_modules")
  if (modules >= 0) return parts[modules + 1].startsWith("@") ? `${parts[modules + 1]}/${parts[modules + 2]}` : parts[modules + 1]
  const packages = parts.lastIndexOf("packages")
  if (packages >= 0 && parts[packages + 1] !== undefined) return `@factline/${parts[packages + 1]}`
  return "app"
}

/** KiB of minified output per package over every `.js` output of `metafile`, largest first. */
export const byPackage = (metafile) => {
  const bytes = new Map()
  for (const [path, output] of Object.entries(metafile.outputs ?? {})) {
    if (!path.endsWith(".js")) continue
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs ?? {})) {
      const name = packageOf(input)
      bytes.set(name, (bytes.get(name) ?? 0) + bytesInOutput)
    }
  }
  return Object.fromEntries([...bytes].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]).map(([name, n]) => [name, Math.round((n / 1024) * 10) / 10]))
}
