/**
 * `PropertySpec.check(module)`: every handler, decider and processor of a module fed inputs drawn from their
 * schemas (Effect's `Arbitrary`, a fixed seed, a bounded number of runs), on the test kit's in-memory
 * platform. Each must answer with facts it declares, valid against their definitions, or with a typed
 * failure (`PermanentError`, `TransientError`…) — never a defect: a throw in `handle`, `decide`, `evolve` or
 * `process` fails the spec naming the input (shrunk to a small one) and where it was thrown in the team's
 * code (`src/…:line:column`). Every fact they answer with is also mapped by each projection of the module
 * listening to it: a mapping that throws on it, or writes a column its table does not have, fails too.
 *
 * ```ts
 * it("every handler and processor of subscriptions answers with declared facts or a typed failure", () =>
 *   PropertySpec.check(subscriptions))
 * ```
 *
 * A decider is given a few facts drawn from the types it folds before the message (so `evolve` is fed too);
 * a processor sees its fact alone. Each run is its own tenant, so runs never share a stream. The message's
 * subject is its payload's `id` or first `…_id` text field (what handlers usually check it against), or
 * `subjects[messageType](payload)` when given. A probe, not a proof: `runs` inputs per piece of code, the
 * same ones on every run of the spec (the seed).
 */
import * as Arbitrary from "effect/Arbitrary"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { Fact } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import type * as Failure from "../failures/Failure.js"
import type * as Handler from "../definitions/Handler.js"
import * as Module from "../definitions/Module.js"
import type * as Processor from "../definitions/Processor.js"
import * as Projection from "../definitions/Projection.js"
import * as ProcessingConsumer from "../processing/ProcessingConsumer.js"
import { dispatch } from "../routing/Dispatch.js"
import { fact as storedFact, message } from "./Builders.js"
import { teamLocation } from "./DefectLocation.js"
import { SpecError } from "./SpecError.js"
import { appendGiven, readStream } from "./SpecStream.js"
import * as TestPlatform from "./TestPlatform.js"

export interface Options {
  /** Inputs drawn per handler, decider and processor (default 100). */
  readonly runs?: number
  /** The draws' seed (default 40): the same inputs on every run of the spec. */
  readonly seed?: number
  /** In place of the module's layer, for code that requires services (a test layer, as its specs use). */
  readonly layer?: Module.AnyLayer
  /** A message type's subject, from its drawn payload (default: its `id` or first `…_id` text field). */
  readonly subjects?: Readonly<Record<string, (payload: any) => string>>
}

type Problem = string
let tenants = 0
const nextTenant = () => `tenant-property-${++tenants}`

/** The payload's `id` or first `…_id` text field, else a fixed subject. */
const defaultSubject = (payload: unknown): string => {
  if (typeof payload === "object" && payload !== null) {
    const entries = Object.entries(payload)
    const id = entries.find(([k, v]) => (k === "id" || k.endsWith("_id")) && typeof v === "string" && v.length > 0)
    if (id !== undefined) return id[1] as string
  }
  return "subject-property"
}

/** The encoded form of a drawn value (what a producer sends, what the ledger stores). */
const encoded = (schema: Schema.Top, value: unknown): unknown => {
  try {
    return Schema.encodeUnknownSync(schema as Schema.Codec<unknown, unknown>)(value)
  } catch {
    return value
  }
}

const shown = (value: unknown) => {
  const text = JSON.stringify(value)
  return text.length > 400 ? `${text.slice(0, 400)}…` : text
}

/** A failure that is not a typed answer of the team's code: a defect, or facts the code does not declare (Registry.validateDrafts). */
const problemOf = (name: string, failure: Failure.Failure): Problem | undefined => {
  if (failure.reason === "defect") {
    const at = teamLocation(failure.defectStack)
    return `threw (a defect, not a typed failure): ${failure.message}${at === undefined ? "" : ` (at ${at})`}`
  }
  // The runtime refuses undeclared or invalid facts as a PermanentError whose message starts with the code's name.
  if (failure.message.startsWith(`${name} returned `)) return failure.message
  return undefined
}

/** Each projection of the module listening to these facts maps them: no throw, no column its table lacks. */
const mappingProblems = (module: Module.Module, facts: ReadonlyArray<Fact>): Problem | undefined => {
  for (const fact of facts) {
    for (const projection of module.projections) {
      for (const mapping of projection.on as ReadonlyArray<Projection.Mapping<Projection.Row | Projection.AdditiveChange>>) {
        if (mapping.fact.type !== fact.type) continue
        let output: Projection.Row | Projection.AdditiveChange | undefined
        try {
          output = mapping.map(fact.data, fact)
        } catch (error) {
          const at = teamLocation(error instanceof Error ? error.stack : undefined)
          return `projection ${projection.name} threw mapping its ${fact.type} fact ${shown(fact.data)}: ${error instanceof Error ? error.message : String(error)}${at === undefined ? "" : ` (at ${at})`}`
        }
        if (output === undefined || output === null || typeof output !== "object") continue
        const problem = Projection.unknownColumnsProblem(projection, fact.type, Projection.writtenColumns(projection, output))
        if (problem !== undefined) return problem
      }
    }
  }
  return undefined
}

/** Runs `property` on `runs` drawn inputs; the first falsified one (shrunk) throws a SpecError naming it. */
const checkAll = async <A>(what: string, arbitrary: Arbitrary.Arbitrary<A>, options: Options, property: (input: A) => Promise<Problem | undefined>) => {
  const result = await Effect.runPromise(Arbitrary.checkEffect(
    arbitrary,
    (input) => Effect.flatMap(Effect.promise(() => property(input)), (problem) => (problem === undefined ? Effect.succeed(true) : Effect.fail(problem))),
    { runs: options.runs ?? 100, seed: options.seed ?? 40, maxShrinks: 100 }
  ))
  if (result._tag === "Falsified") {
    const problem = "error" in result.failure ? result.failure.error : "returned false"
    throw new SpecError(`${what}, on the input ${shown(result.shrunkInput)} (run ${result.runs}, seed ${options.seed ?? 40}): ${problem}`)
  }
  if (result._tag !== "Passed") throw new SpecError(`${what}: inputs could not be drawn (${result._tag})`)
}

const handlerProperty = (module: Module.Module, handler: Handler.Any, options: Options) => {
  const definition = handler.message
  const schema = definition.versions[definition.latestVersion - 1]!.schema
  const folded = handler._tag === "Decider" ? [...handler.emits, ...handler.reads] : []
  const arbitrary = Arbitrary.all({
    payload: Arbitrary.schema(schema),
    given: Arbitrary.all(folded.map((d) => Arbitrary.array(Arbitrary.schema(d.schema as Schema.Top), { maxLength: 2 })))
  })
  const platform = TestPlatform.make([Module.make("property", { handlers: [handler], layer: options.layer ?? module.layer })], { requireEmitters: false })
  const what = `${handler._tag === "Decider" ? "decider" : "handler"} ${handler.name} (module ${module.name})`
  return checkAll(what, arbitrary, options, async ({ payload, given }) => {
    const tenant = nextTenant()
    const subject = (options.subjects?.[definition.messageType] ?? defaultSubject)(payload)
    const facts = folded.flatMap((d, i) => (given[i] ?? []).map((data) => ({ type: d.type, data: encoded(d.schema as Schema.Top, data) })))
    await appendGiven(platform, tenant, subject, facts)
    const envelope = message(definition, encoded(schema, payload), { subject, tenant })
    const routed = platform.registry.route(envelope, envelope.payload)
    // A drawn payload the definition itself refuses (a filter Arbitrary could not honour) tells nothing.
    if (Result.isFailure(routed)) return undefined
    const outcome = await platform.run(Effect.map(dispatch([{ key: "m", value: routed.success }]), (o) => o.get("m") ?? Consumer.done))
    if (Result.isFailure(outcome)) return problemOf(handler.name, outcome.failure)
    const stream = await readStream(platform, tenant, subject)
    return mappingProblems(module, stream.facts.filter((f) => f.causation_id === envelope.idempotency_key))
  })
}

const processorProperty = (module: Module.Module, processor: Processor.Any, options: Options) => {
  const definition = processor.fact
  const schema = definition.versions[definition.latestVersion - 1]!.schema
  const platform = TestPlatform.make([Module.make("property", { processors: [processor], layer: options.layer ?? module.layer })], { requireEmitters: false })
  return checkAll(`processor ${processor.name} (module ${module.name})`, Arbitrary.schema(schema), options, async (data) => {
    const tenant = nextTenant()
    const stream = defaultSubject(data)
    const built = storedFact(definition, encoded(schema, data) as never, { stream, tenant })
    await appendGiven(platform, tenant, stream, [built])
    const parent = (await readStream(platform, tenant, stream)).facts.find((f) => f.fact_id === built.fact_id) ?? built
    const outcome = await platform.run(Effect.map(ProcessingConsumer.process([{ key: "f", value: { fact: parent } }]), (o) => o.get("f") ?? Consumer.done))
    if (Result.isFailure(outcome)) return problemOf(processor.name, outcome.failure)
    const caused = (await readStream(platform, tenant, stream)).facts.filter((f) => f.causation_id === parent.fact_id && f.caused_by === processor.name)
    return mappingProblems(module, caused)
  })
}

/**
 * Feeds every handler, decider and processor of `module` inputs drawn from their schemas; throws a
 * `SpecError` naming the code, the (shrunk) input and the problem at the first that answers with a defect
 * or an undeclared or invalid fact, or whose facts a projection of the module cannot map.
 */
export const check = async (module: Module.Module, options: Options = {}): Promise<void> => {
  for (const handler of module.handlers) await handlerProperty(module, handler, options)
  for (const processor of module.processors) await processorProperty(module, processor, options)
}
