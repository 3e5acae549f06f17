/**
 * One naming rule for every name a module registers — modules, handlers,
 * deciders, processors, projections, fact types and message types — so a name
 * that works in one place works in all, and every refusal states the rule.
 * Names are part of fact ids and SQL identifiers (`<fact type>_seq`), so they
 * are stable, lower-case and short. Message types are additionally namespaced
 * (`call.completed`), as the envelope requires.
 */
export const rule = "lower-case letters and digits in words joined by '_', '-' or '.', starting with a letter, at most 64 characters (e.g. record-outcome, dispute_rejected, call.completed)"

const pattern = /^[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$/

export type Kind = "module" | "handler" | "decider" | "processor" | "projection" | "fact type" | "message type" | "webhook event type" | "timer"

export class NamingError extends Error {
  override readonly name = "NamingError"
}

export const isValid = (name: string): boolean => name.length <= 64 && pattern.test(name)

/** Returns the name, or throws a `NamingError` that quotes it and states the rule. */
export const check = (kind: Kind, name: string): string => {
  if (typeof name !== "string" || !isValid(name)) {
    throw new NamingError(`${kind} name ${JSON.stringify(name)} is not valid: use ${rule}`)
  }
  if (kind === "message type" && !name.includes(".")) {
    throw new NamingError(`message type ${JSON.stringify(name)} must be namespaced with a dot, e.g. call.completed (and otherwise follow the rule: ${rule})`)
  }
  return name
}
