/**
 * Decoding problems as data: every failure names the field it is about.
 *
 * Used by every boundary (HTTP ingest, queue consumers, producers) so that a
 * rejected message always says which field was wrong and why. It does not
 * decide what to do with a failure — callers map it to a 400 or a DLQ record.
 *
 * A list of problems is as long as the input is hostile (150,000 unknown keys
 * fit in a 5 MiB body): everything shown to someone — `render`, `listed` —
 * names the first `maxListed` and counts the rest, each entry cut at
 * `maxProblemChars`. Collect problems with a loop, never `push(...list)`: a
 * spread of a large array overflows the engine's argument count.
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"

/**
 * One problem with one field. `path` is dotted (`payload.duration_s`, `events.3.tenant_id`); `""` is the whole
 * value. The one schema of it: failures (core), error bodies (the HTTP API's `Problem`) and the client use it.
 */
export const Problem = Schema.Struct({ path: Schema.String, message: Schema.String })
export type Problem = typeof Problem.Type

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** Turns a schema issue into problems, each naming its field. */
export const fromIssue = (issue: SchemaIssue.Issue, prefix: ReadonlyArray<PropertyKey> = []): Array<Problem> =>
  formatter(issue).issues.map((i) => ({
    path: [...prefix, ...(i.path ?? []).map((p) => (typeof p === "object" && p !== null && "key" in p ? p.key : p))]
      .map(String)
      .join("."),
    message: i.message
  }))

/** How many problems a message or an error body lists; the rest are counted. */
export const maxListed = 100
/** A listed problem's path or message is cut at this length (a field name may be megabytes long). */
export const maxProblemChars = 1_000

const cut = (text: string) => (text.length > maxProblemChars ? `${text.slice(0, maxProblemChars)}…` : text)

/** `N problem(s)`, and `; the first 100 are listed` when there are more than `maxListed`. */
export const summary = (total: number): string =>
  total > maxListed ? `${total} problem(s); the first ${maxListed} are listed` : `${total} problem(s)`

/** Problems as an error body's `details` carry them: the first `maxListed` (each cut), and how many there are. */
export const listed = (problems: ReadonlyArray<Problem>): { readonly problems: Array<Problem>; readonly problems_total: number } => ({
  problems: problems.slice(0, maxListed).map((p) => ({ path: cut(p.path), message: cut(p.message) })),
  problems_total: problems.length
})

/** Renders problems on one line, for `last_error` and logs: the first `maxListed`, then the count. */
export const render = (problems: ReadonlyArray<Problem>): string => {
  const line = listed(problems).problems.map((p) => (p.path === "" ? p.message : `${p.path}: ${p.message}`)).join("; ")
  return problems.length > maxListed ? `${line}; … (${summary(problems.length)})` : line
}

/**
 * Strict, total decoding: unknown fields are errors, every problem is reported
 * (not just the first), and the result is a `Result`, never a throw.
 *
 * Valid input, the common case, is decoded once without the excess-property
 * check (half the cost: the check walks every object's keys against its
 * schema's) and accepted when the decoded value kept every key the input had
 * (`keptEveryKey`): a struct drops only the keys it does not know, and those
 * are what strict decoding refuses. Anything else, invalid input or a dropped
 * key, is decoded again strictly, which decides and reports every problem.
 */
export const decodeStrict = <S extends Schema.Top>(schema: S) => {
  const decode = Schema.decodeUnknownResult(schema as any)
  return (input: unknown, prefix: ReadonlyArray<PropertyKey> = []): Result.Result<S["Type"], Array<Problem>> => {
    const lenient = decode(input) as Result.Result<S["Type"], Schema.SchemaError>
    if (Result.isSuccess(lenient) && keptEveryKey(input, lenient.success)) return Result.succeed(lenient.success)
    const result = decode(input, { errors: "all", onExcessProperty: "error" }) as Result.Result<S["Type"], Schema.SchemaError>
    return Result.isSuccess(result) ? Result.succeed(result.success) : Result.fail(fromIssue(result.failure.issue, prefix))
  }
}

/**
 * Whether a decoded value kept every key of the input, at every depth where the
 * input is an object or an array. A primitive input cannot hide a key, whatever it
 * decoded to; an object or array input decoded to something of another shape (a
 * transformation) counts as a dropped key, so strict decoding decides.
 */
export const keptEveryKey = (input: unknown, output: unknown): boolean => {
  if (input === output || input === null || typeof input !== "object") return true
  if (output === null || typeof output !== "object") return false
  if (Array.isArray(input)) {
    if (!Array.isArray(output) || output.length !== input.length) return false
    for (let i = 0; i < input.length; i++) if (!keptEveryKey(input[i], output[i])) return false
    return true
  }
  if (Array.isArray(output)) return false
  for (const key of Object.keys(input)) {
    if (!Object.hasOwn(output, key)) return false
    if (!keptEveryKey((input as Record<string, unknown>)[key], (output as Record<string, unknown>)[key])) return false
  }
  return true
}
