/**
 * Query strings read strictly: a parameter given twice is refused (400 naming
 * it) instead of silently taking the first value, and, where a route lists the
 * parameters it knows, an unknown one is refused too — a misspelt `limt=10`
 * must not quietly return the default page.
 *
 * It does not check values: each route validates what it reads.
 */
import { Failure } from "@factline/core"
import { Issues } from "@factline/schemas"

/** A refusal of `params`' repeated names, and of names not in `known` (when given); undefined when they pass. */
export const refusal = (params: URLSearchParams, known?: ReadonlyArray<string>): Failure.InvalidInput | undefined => {
  const counts = new Map<string, number>()
  for (const [name] of params) counts.set(name, (counts.get(name) ?? 0) + 1)
  const problems: Array<{ path: string; message: string }> = []
  for (const [name, count] of counts) {
    if (count > 1) problems.push({ path: name, message: `given ${count} times; give it once` })
    else if (known !== undefined && !known.includes(name)) {
      problems.push({ path: name, message: `unknown query parameter (known: ${known.join(", ")})` })
    }
  }
  return problems.length === 0
    ? undefined
    : new Failure.InvalidInput({ code: "invalid_query", message: Issues.render(problems.map((p) => ({ ...p, path: JSON.stringify(p.path) }))), problems: problems })
}
