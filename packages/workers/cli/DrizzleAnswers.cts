/**
 * Preloaded into `drizzle-kit generate` by `factline db:generate` (node --require): answers drizzle-kit's
 * interactive question "is X created or renamed from another …?" without a terminal. drizzle-kit 0.31 asks it
 * whenever a table or column disappears while another appears, and without a TTY it throws ("Interactive
 * prompts require a TTY terminal"). Here the question is read from what drizzle-kit draws, and answered from
 * FACTLINE_DRIZZLE_ANSWERS (`{ renames: [[from, to]], creates: [name] }`): a listed rename is chosen, a listed
 * create is chosen; any other question stops drizzle-kit (exit 3, nothing written) with the two ways to answer
 * it on the command line. Nothing is ever guessed: a wrong "create" drops a column's data.
 */
"use strict"

const answers = JSON.parse(process.env.FACTLINE_DRIZZLE_ANSWERS || "{}") as { readonly renames?: ReadonlyArray<readonly [string, string]>; readonly creates?: ReadonlyArray<string> }
const renames = answers.renames || []
const creates = answers.creates || []

// drizzle-kit's prompt library (hanji) refuses to draw without a TTY and listens for "keypress" on stdin.
process.stdin.isTTY = true
process.stdout.isTTY = true
process.stdin.setRawMode = () => process.stdin
if (!process.stdout.columns) process.stdout.columns = 200

const plain = (s: string) => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "")
const write = process.stdout.write.bind(process.stdout)
let prompting = false
let screen = ""
process.stdout.write = ((chunk: string | Uint8Array, ...rest: Array<unknown>) => {
  if (!prompting) return (write as (chunk: string | Uint8Array, ...rest: Array<unknown>) => boolean)(chunk, ...rest)
  screen += String(chunk)
  const callback = rest.find((r) => typeof r === "function")
  if (typeof callback === "function") callback()
  return true
}) as typeof process.stdout.write

/** A choice drawn: a rename from another, or "create". */
type Item = { readonly from: string; readonly to: string; readonly create?: undefined } | { readonly create: string; readonly from?: undefined; readonly to?: undefined }

/** The question drawn last: what it asks about and its choices, in order. */
const question = () => {
  const text = plain(screen)
  const at = text.lastIndexOf("\nIs ")
  const block = text.slice(at + 1).split("\n")
  const head = /^Is (\S+) (table|column|schema)(?: in (\S+) table)? created or renamed from another \w+\?/.exec(block[0] ?? "") || []
  const items: Array<Item> = block.slice(1).map((line) => line.replace(/^\s*❯?\s*/, "").trim()).filter((line) => /^[+~] /.test(line)).map((line) => {
    const renamed = /^~ (\S+) › (\S+)\s+rename/.exec(line)
    return renamed ? { from: renamed[1] ?? "", to: renamed[2] ?? "" } : { create: line.slice(2).split(/\s+/)[0] ?? "" }
  })
  return { name: head[1], entity: head[2], table: head[3], items }
}

const answer = () => {
  const { name, entity, table, items } = question()
  const qualified = (n: string | undefined) => (table ? [n, `${table}.${n}`] : [n])
  let index = items.findIndex((item) => item.from !== undefined && renames.some(([from, to]) => qualified(item.from).includes(from) && qualified(item.to).includes(to)))
  if (index < 0 && creates.some((c) => qualified(name).includes(c))) index = items.findIndex((item) => item.create !== undefined)
  if (index < 0 || name === undefined) {
    const where = table ? `${entity} ${table}.${name}` : `${entity} ${name}`
    const candidates = items.filter((item) => item.from !== undefined).flatMap((item) => (item.from === undefined ? [] : [item.from]))
    process.stderr.write(
      `\ndb:generate: drizzle-kit asks whether ${where} is new or renamed from ${candidates.map((c) => (table ? `${table}.${c}` : c)).join(" or ")}; nothing was generated.\n` +
        `Run it again with the answer:\n` +
        candidates.map((c) => `  --rename ${table ? `${table}.${c}:${table}.${name}` : `${c}:${name}`}   the ${entity} ${c} was renamed to ${name} (its data kept)\n`).join("") +
        `  --create ${table ? `${table}.` : ""}${name}   ${name} is a new ${entity}: ${candidates.join(", ")} dropped, with its data\n`
    )
    process.exit(3)
  }
  for (let i = 0; i < index; i++) process.stdin.emit("keypress", undefined, { name: "down" })
  process.stdin.emit("keypress", "\r", { name: "return" })
}

const on = process.stdin.on.bind(process.stdin)
process.stdin.on = ((event: string, listener: (...args: Array<unknown>) => void) => {
  if (event === "keypress") {
    prompting = true
    screen = ""
    setTimeout(answer, 20)
  }
  return on(event, listener)
}) as typeof process.stdin.on
const removeListener = process.stdin.removeListener.bind(process.stdin)
process.stdin.removeListener = ((event: string, listener: (...args: Array<unknown>) => void) => {
  if (event === "keypress") prompting = false
  return removeListener(event, listener)
}) as typeof process.stdin.removeListener
