// The raw local state files of the running Miniflare instances, for tests that look below the bindings (Node):
// personal-data.workers.test.ts asks which files still hold a value after an erasure removed it from every row and
// object it can read — SQLite free pages, write-ahead logs, blob files not yet collected — and reports the answer.
// Miniflare keeps each instance's D1, Durable Object and R2 storage under `<os tmpdir>/miniflare-<hex>/` while it
// runs (the tests configure no persistence); `.wrangler/state` is looked at too, for a run that persists there.
//   GET /grep?needle=TEXT  →  { roots, files, bytes, hits: [{ file, count, size }] }
import { readdirSync, readFileSync, statSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const app = join(dirname(fileURLToPath(import.meta.url)), "..")

const roots = () => [
  ...readdirSync(tmpdir()).filter((name) => name.startsWith("miniflare-")).map((name) => join(tmpdir(), name)),
  join(app, ".wrangler", "state")
]

const filesUnder = (dir) => {
  let entries
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return []
  }
  return entries.flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : e.isFile() ? [join(dir, e.name)] : []))
}

const count = (haystack, needle) => {
  let n = 0
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + 1)) n++
  return n
}

export const grep = (needle) => {
  const wanted = Buffer.from(needle, "utf8")
  const scanned = roots()
  let files = 0
  let bytes = 0
  const hits = []
  for (const root of scanned) {
    for (const file of filesUnder(root)) {
      let content
      try {
        content = readFileSync(file)
      } catch {
        continue // removed while walked (a closed instance's directory)
      }
      files++
      bytes += content.length
      const n = count(content, wanted)
      if (n > 0) hits.push({ file, count: n, size: statSync(file, { throwIfNoEntry: false })?.size ?? content.length })
    }
  }
  return { roots: scanned, files, bytes, hits }
}

export const start = async (port = 0) => {
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://state-files")
    const needle = url.searchParams.get("needle")
    if (req.method !== "GET" || url.pathname !== "/grep" || needle === null || needle.length < 6) {
      res.writeHead(400, { "content-type": "text/plain" })
      return res.end("GET /grep?needle=TEXT (at least 6 characters)")
    }
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify(grep(needle)))
  })
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve))
  server.unref()
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) }
}
