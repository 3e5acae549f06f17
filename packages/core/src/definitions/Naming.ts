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

export type Kind = "module" | "handler" | "decider" | "processor" | "projection" | "fact type" | "message type" | "webhook event type" | "timer" | "workflow" | "workflow step"

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

/**
 * The tense rule of message types (`MessageDefinition.event` / `.command`): an event says what happened, in the past
 * tense (`call.completed`, `order.placed`, `invoice.sent`); a command says what to do, in the imperative
 * (`call.dispute`, `invoice.issue`). Read from the name's last word (`test.reminder.requested` → `requested`): a word
 * ending in `-ed` (but not `feed`, `need`, `proceed`…) or an irregular past participle (`sent`, `paid`, `built`,
 * `done`…) is past; a word that is both (`read`, `set`, `reset`, `cut`) suits either kind. The registry refuses a
 * message whose name breaks the rule for its kind, when it is built.
 */
export const tenseRule = "an event is named in the past tense (call.completed, order.placed, invoice.sent); a command in the imperative (call.dispute, invoice.issue)"

/** Words ending in -ed that are not past tenses. */
const notPast = new Set(["feed", "need", "seed", "speed", "breed", "bleed", "proceed", "succeed", "exceed", "heed", "shed", "embed", "bed", "weed", "reseed", "refeed"])

/** Irregular past participles (and past tenses) that do not end in -ed. */
const irregularPast = new Set([
  "sent", "paid", "built", "done", "made", "held", "lost", "won", "sold", "bought", "kept", "left", "met", "spent", "taken", "given",
  "written", "shown", "known", "drawn", "begun", "chosen", "frozen", "stolen", "broken", "spoken", "forgotten", "hidden", "driven",
  "eaten", "fallen", "grown", "thrown", "seen", "withdrawn", "undone", "found", "bound", "told", "felt", "brought", "caught", "taught",
  "thought", "fought", "sought", "lent", "dealt", "meant", "slept", "swept", "lit", "fed", "led", "fled", "struck", "stuck", "hung",
  "sung", "rung", "sprung", "drunk", "sunk", "flown", "blown", "worn", "torn", "sworn", "born", "beaten", "bitten", "ridden", "risen",
  "arisen", "proven", "shaken", "woken", "forgiven", "forbidden", "got", "gotten", "sat", "stood", "understood", "mistaken", "overtaken",
  "rewritten", "rebuilt", "resold", "upheld", "withheld", "overridden", "overpaid", "prepaid", "repaid", "underpaid", "unbound", "rebound",
  "outgrown", "overthrown", "redone", "remade", "resent", "mislaid", "laid", "said", "heard", "sped", "bred", "wound", "ground", "spun",
  "dug", "clung", "flung", "slung", "stung", "swung", "wrung", "shot", "forgot", "fit", "become", "overcome"
])

/** Both a past participle and an imperative: either kind may end with one. */
const eitherTense = new Set([
  "read", "set", "put", "cut", "reset", "hit", "quit", "shut", "split", "spread", "cast", "broadcast", "forecast", "upset", "cost",
  "let", "bet", "hurt", "run", "rerun", "come", "bid", "burst", "offset", "input", "output", "preset", "reread", "fit", "become", "overcome"
])

export type Tense = "past" | "imperative" | "either"

/** The tense of a message type, read from its last word. */
export const tenseOf = (messageType: string): Tense => {
  const word = messageType.split(/[._-]/).pop() ?? ""
  if (eitherTense.has(word)) return "either"
  if (irregularPast.has(word) || (word.endsWith("ed") && !notPast.has(word))) return "past"
  return "imperative"
}

/** Whether a message type's name suits its kind (`event`: past tense; `command`: imperative). */
export const suitsKind = (kind: "event" | "command", messageType: string): boolean => {
  const tense = tenseOf(messageType)
  return tense === "either" || (kind === "event" ? tense === "past" : tense === "imperative")
}
