/**
 * How every `factline` command reads its command line: Node's `util.parseArgs`, strict. A command names the
 * options that take a value (`--name X`, `--name=X`), those that may be repeated (`multiples`: a list) and its switches (`--help`/`-h` is always one); anything
 * else — an unknown option, a value missing — is an `ArgsError` naming it, which the command reports as its
 * usage error. It knows no command.
 */
import { parseArgs } from "node:util"

export class ArgsError extends Error {}

/** `{ options, positional }` of `argv`. */
export const parse = (argv, { values = [], multiples = [], switches = [], positionals = true } = {}) => {
  const options = { help: { type: "boolean", short: "h" } }
  for (const name of values) options[name] = { type: "string" }
  for (const name of multiples) options[name] = { type: "string", multiple: true }
  for (const name of switches) options[name] = { type: "boolean" }
  try {
    const parsed = parseArgs({ args: argv, options, strict: true, allowPositionals: positionals })
    return { options: parsed.values, positional: parsed.positionals }
  } catch (error) {
    // Node's first sentence ("Unknown option '--colour'"), without its advice on arguments that start with '-'.
    if (String(error?.code).startsWith("ERR_PARSE_ARGS_")) throw new ArgsError(error.message.split(/\.\s/)[0])
    throw error
  }
}
