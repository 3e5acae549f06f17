// node --test scripts/seed-differences.test.mjs: docs/seed-differences.md cites the seed documents by file and line, each
// reference followed by a quote of that line; the seeds are ../shared/seeds beside the repository (as in CI). A
// reference whose file is missing, whose line is past the file's end or whose quote is not on that line fails here.
import assert from "node:assert/strict"
import { existsSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { test } from "node:test"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const page = join(root, "docs", "seed-differences.md")
const seeds = join(root, "..", "shared", "seeds")

/** `FILE:LINE` in backticks, where FILE is a seed's name (`003_9f33bc6c90f9cf07.txt`). */
const reference = /`(\d{3}_[0-9a-f]{16}\.txt):(\d+)`/g
/** A reference and the quote that must follow it: `FILE:LINE` "words of that line". */
const quoted = /^\s*"([^"\n]+)"/

/** A seed's lines, 1-based as an editor numbers them (a final newline ends the last line, it adds none). */
const linesOf = (text) => {
  const lines = text.split("\n")
  if (lines.at(-1) === "") lines.pop()
  return lines
}

/**
 * Every problem of a page's seed references: the file does not exist, the line is not in it, the reference has no
 * quote, or the quote is not on that line. `readSeed(name)` returns a seed's text or undefined.
 */
const problemsOf = (markdown, readSeed) => {
  const problems = []
  const cache = new Map()
  const lines = (name) => {
    if (!cache.has(name)) {
      const text = readSeed(name)
      cache.set(name, text === undefined ? undefined : linesOf(text))
    }
    return cache.get(name)
  }
  for (const match of markdown.matchAll(reference)) {
    const [whole, name, number] = match
    const at = `${name}:${number}`
    const seed = lines(name)
    if (seed === undefined) {
      problems.push(`${at}: no seed file ${name} in ${seeds}`)
      continue
    }
    const line = Number(number)
    if (line < 1 || line > seed.length) {
      problems.push(`${at}: line ${line} is not in ${name} (${seed.length} lines)`)
      continue
    }
    const quote = quoted.exec(markdown.slice(match.index + whole.length))
    if (quote === null) {
      problems.push(`${at}: no "quoted words" of the line follow the reference`)
      continue
    }
    if (!seed[line - 1].includes(quote[1])) {
      problems.push(`${at}: "${quote[1]}" is not on that line, which reads: ${JSON.stringify(seed[line - 1].slice(0, 200))}`)
    }
  }
  return problems
}

/** The rows of the page's table (after its header and separator), each with its first cell. */
const tableRows = (markdown) => {
  const lines = markdown.split("\n")
  const header = lines.findIndex((l) => l.startsWith("| Seed says (file:line) |"))
  if (header < 0) return undefined
  const rows = []
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith("|")) break
    rows.push({ line, first: line.slice(1).split(" | ")[0] })
  }
  return rows
}

const readSeed = (name) => {
  const file = join(seeds, name)
  return existsSync(file) ? readFileSync(file, "utf8") : undefined
}

test("the seed documents are beside the repository (../shared/seeds)", () => {
  assert.ok(
    existsSync(seeds),
    `the seed documents are not at ${seeds}: docs/seed-differences.md cites them by file and line, and this test checks ` +
      "each citation against them — check out shared/ beside the repository (as CI does) and run it again"
  )
})

test("every seed reference in docs/seed-differences.md names a seed file and a line that exist, and quotes that line", () => {
  assert.ok(existsSync(seeds), `no seed documents at ${seeds} (see the test above)`)
  const markdown = readFileSync(page, "utf8")
  const count = [...markdown.matchAll(reference)].length
  assert.ok(count >= 20, `expected the page's references (one or more per row), found ${count}`)
  assert.deepEqual(problemsOf(markdown, readSeed), [], "seed references that do not hold")
})

test("every row of the table cites at least one seed line in its first cell", () => {
  const rows = tableRows(readFileSync(page, "utf8"))
  assert.ok(rows !== undefined, 'docs/seed-differences.md has no table headed "| Seed says (file:line) | …"')
  assert.ok(rows.length >= 20, `expected a row per difference, found ${rows.length}`)
  const uncited = rows.filter((r) => [...r.first.matchAll(reference)].length === 0).map((r) => r.line.slice(0, 120))
  assert.deepEqual(uncited, [], "rows whose first cell cites no seed line")
})

test("README.md links to docs/seed-differences.md", () => {
  assert.match(readFileSync(join(root, "README.md"), "utf8"), /\]\(docs\/seed-differences\.md\)/)
})

test("a wrong line, a line past the end, a missing file and a missing quote are each reported", () => {
  const good = '`000_ac3b551c1194e162.txt:18` "KV idempotency cache"'
  assert.deepEqual(problemsOf(good, readSeed), [])
  const cases = [
    ['`000_ac3b551c1194e162.txt:17` "KV idempotency cache"', /is not on that line/],
    ['`000_ac3b551c1194e162.txt:100000` "KV idempotency cache"', /line 100000 is not in 000_ac3b551c1194e162\.txt/],
    ['`009_0000000000000000.txt:1` "anything"', /no seed file 009_0000000000000000\.txt/],
    ["`000_ac3b551c1194e162.txt:18` with no quote", /no "quoted words"/]
  ]
  for (const [text, expected] of cases) {
    const problems = problemsOf(text, readSeed)
    assert.equal(problems.length, 1, `${text}: ${JSON.stringify(problems)}`)
    assert.match(problems[0], expected)
  }
})
