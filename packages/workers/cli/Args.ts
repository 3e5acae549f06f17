/**
 * How every `factline` command reads its command line: Node's `util.parseArgs`, strict. A command names the
 * options that take a value (`--name X`, `--name=X`), those that may be repeated (`multiples`: a list) and its switches (`--help`/`-h` is always one); anything
 * else — an unknown option, a value missing — is an `ArgsError` naming it, which the command reports as its
 * usage error. It knows no command.
 */
import { parseArgs } from "node:util"

export class ArgsError extends Error {}

export interface Spec<V extends string, M extends string, S extends string> {
  readonly values?: ReadonlyArray<V>
  readonly multiples?: ReadonlyArray<M>
  readonly switches?: ReadonlyArray<S>
  readonly positionals?: boolean
}

/** The options read: a value per `values` name, a list per `multiples` name, true per switch given. */
export type Options<V extends string, M extends string, S extends string> =
  & { readonly [K in V]?: string }
  & { readonly [K in M]?: ReadonlyArray<string> }
  & { readonly [K in S | "help"]?: boolean }

type OptionConfig = { readonly type: "string" | "boolean"; readonly short?: string; readonly multiple?: boolean }

/** `{ options, positional }` of `argv`. */
export const parse = <V extends string = never, M extends string = never, S extends string = never>(
  argv: ReadonlyArray<string>,
  { values = [], multiples = [], switches = [], positionals = true }: Spec<V, M, S> = {}
): { readonly options: Options<V, M, S>; readonly positional: ReadonlyArray<string> } => {
  const options: Record<string, OptionConfig> = { help: { type: "boolean", short: "h" } }
  for (const name of values) options[name] = { type: "string" }
  for (const name of multiples) options[name] = { type: "string", multiple: true }
  for (const name of switches) options[name] = { type: "boolean" }
  try {
    const parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: positionals })
    return { options: parsed.values as Options<V, M, S>, positional: parsed.positionals }
  } catch (error) {
    // Node's first sentence ("Unknown option '--colour'"), without its advice on arguments that start with '-'.
    if (error instanceof Error && String((error as { code?: unknown }).code).startsWith("ERR_PARSE_ARGS_")) throw new ArgsError(error.message.split(/\.\s/)[0])
    throw error
  }
}
