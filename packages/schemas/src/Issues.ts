/**
 * Decoding problems as data: every failure names the field it is about.
 *
 * Used by every boundary (HTTP ingest, queue consumers, producers) so that a
 * rejected message always says which field was wrong and why. It does not
 * decide what to do with a failure — callers map it to a 400 or a DLQ record.
 */
import { Result, Schema, SchemaIssue } from "effect"

/** One problem with one field. `path` is dotted (`payload.duration_s`, `events.3.tenant_id`); `""` is the whole value. */
export interface Problem {
  readonly path: string
  readonly message: string
}

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** Turns a schema issue into problems, each naming its field. */
export const fromIssue = (issue: SchemaIssue.Issue, prefix: ReadonlyArray<PropertyKey> = []): Array<Problem> =>
  formatter(issue).issues.map((i) => ({
    path: [...prefix, ...(i.path ?? []).map((p) => (typeof p === "object" && p !== null && "key" in p ? p.key : p))]
      .map(String)
      .join("."),
    message: i.message
  }))

/** Renders problems on one line, for `last_error` and logs. */
export const render = (problems: ReadonlyArray<Problem>): string =>
  problems.map((p) => (p.path === "" ? p.message : `${p.path}: ${p.message}`)).join("; ")

/**
 * Strict, total decoding: unknown fields are errors, every problem is reported
 * (not just the first), and the result is a `Result`, never a throw.
 */
export const decodeStrict = <S extends Schema.Top>(schema: S) => {
  const decode = Schema.decodeUnknownResult(schema as any)
  return (input: unknown, prefix: ReadonlyArray<PropertyKey> = []): Result.Result<S["Type"], Array<Problem>> => {
    const result = decode(input, { errors: "all", onExcessProperty: "error" }) as Result.Result<S["Type"], Schema.SchemaError>
    return Result.isSuccess(result) ? Result.succeed(result.success) : Result.fail(fromIssue(result.failure.issue, prefix))
  }
}
