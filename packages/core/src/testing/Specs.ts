/**
 * Specifications for product code, in plain Node on the in-memory platform
 * (TestPlatform): the same registry checks, dispatch, ledger SQL and
 * projection SQL as the Worker, in milliseconds.
 *
 * ```ts
 * await DeciderSpec.for(decideDispute).given([charge]).when(dispute).then([Refund.make({ … })])
 * await HandlerSpec.for(recordOutcome).when(completed).thenFails(/subject/)
 * await ProcessorSpec.for(qualifyCall).when(outcome).then([Qualification.make({ … }), Charge.make({ … })])
 * await ProcessorSpec.for(markOverdue).when(issued).after("30 days").then([InvoiceOverdue.make({ … })])
 * await ProcessorSpec.for(deriveMrr).given([started]).when(cancelled).then([MrrChanged.make({ … })])
 * await DeciderSpec.for(cancel).given([started, renewal]).when(cancelCommand).after("30 days").then([])
 * await ProjectionSpec.for(buyerBudgets).given([charge, refund]).then([{ buyer_id: "b1", spent_cents: 0, … }])
 * ```
 *
 * Every spec also checks what the runtime promises: a handler's or
 * processor's message delivered a second time appends nothing more, and a
 * projection gives the same rows when every fact is applied twice and when
 * the facts arrive in reverse order.
 *
 * `given` facts (and timer requests, recorded as the runtime records them) are
 * in the stream before the message or fact: a decider folds them, a processor
 * that declares `reads` folds those before its fact. With `after(duration)`
 * the spec runs on a `TestClock` set to the message's or fact's `created_at`,
 * moves it on by `duration` and fires the stream's timers then due — the
 * given ones and those just scheduled, less any cancelled — as the ledger
 * shard's alarm would (twice, to check they fire once); its `then` expects
 * the facts those timers appended. "The timer fires unless cancelled" is one
 * spec per branch: `.given([started, renewal]).when(cancel).after("30 days").then([])`.
 *
 * Code that requires services is given a layer in place of its module's
 * (`ProcessorSpec.for(chargeCall, { layer: PricingTest })`); without one it
 * does not compile.
 */
import type { Duration, Layer } from "effect"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as TestClock from "effect/testing/TestClock"
import type { Envelope, Fact } from "@factline/schemas"
import * as Consumer from "../consuming/Consumer.js"
import * as Failure from "../failures/Failure.js"
import type { NewFact } from "../definitions/FactDefinition.js"
import type * as Handler from "../definitions/Handler.js"
import * as Module from "../definitions/Module.js"
import type * as Processor from "../definitions/Processor.js"
import * as Timer from "../definitions/Timer.js"
import { Ledger } from "../ledger/Ledger.js"
import * as ProcessingConsumer from "../processing/ProcessingConsumer.js"
import { dispatch } from "../routing/Dispatch.js"
import * as TestPlatform from "./TestPlatform.js"
import { teamLocation } from "./DefectLocation.js"
import { appendGiven, fireAfter, type Given, opened, readStream } from "./SpecStream.js"
import * as SnapshotSpec from "./SnapshotSpec.js"
import { json, matches, same, SpecError } from "./SpecError.js"

export { SpecError } from "./SpecError.js"
export { appendGiven, type Given, readStream } from "./SpecStream.js"

const drafts = (facts: ReadonlyArray<{ readonly type: string; readonly data: unknown }>) => json(facts.map(({ type, data }) => ({ type, data })))
const errorOf = (outcome: Consumer.Outcome | undefined) => (outcome !== undefined && Result.isFailure(outcome) ? outcome.failure.message : undefined)

/** Delivers once, reads the stream, and — when it succeeded — delivers again: the second must append nothing (`notIdempotent` says why not). */
const deliveredTwice = <E, R>(deliver: Effect.Effect<Consumer.Outcome, E, R>, read: Effect.Effect<{ readonly version: number; readonly facts: ReadonlyArray<Fact> }, E, R>, notIdempotent: string) =>
  Effect.gen(function*() {
    const outcome = yield* deliver
    const first = yield* read
    if (Result.isSuccess(outcome)) {
      const again = yield* deliver
      const second = yield* read
      if (Result.isFailure(again) || second.version !== first.version) {
        throw new SpecError(`${notIdempotent} ${Result.isSuccess(again) ? "appended more facts" : `failed: ${errorOf(again)}`}`, second.version, first.version)
      }
    }
    return { outcome, first }
  })
const kindOf = (failure: Failure.Failure) => (failure.retryable ? (failure.budget === undefined ? "transient" : failure.reason) : `permanent, ${failure.reason}`)
/** A failure's text, a defect's with where it happened in the team's code (`at src/…:line:column`). */
const described = (failure: Failure.Failure) => {
  const at = teamLocation(failure.defectStack)
  return at === undefined ? failure.message : `${failure.message} (at ${at})`
}


export interface Result_ {
  readonly outcome: Consumer.Outcome
  /** The facts the message or fact caused, as stored. */
  readonly facts: ReadonlyArray<Fact>
}

/** A spec run: `then(facts)` or `thenFails(match?)`; `result()` for custom assertions. */
abstract class Run {
  private outcome: Promise<Result_> | undefined
  protected abstract execute(): Promise<Result_>
  protected abstract readonly what: string
  /** The cause's `created_at`, from which the `after` of expected timer requests counts. */
  protected abstract readonly timeBase: string
  /** The outcome and the facts the message or fact caused, for assertions of your own. */
  result(): Promise<Result_> {
    return (this.outcome ??= this.execute())
  }

  /** Expects exactly these facts (type and data, in order) to be appended, and the message to succeed. */
  then(expected: ReadonlyArray<NewFact<string, unknown> | Timer.Request>): Promise<void> {
    if (typeof expected === "function") {
      // Awaited by mistake as a promise (`await spec.when(m)`): behave like `result()`.
      return this.result().then(expected as never, arguments[1] as never)
    }
    return this.result().then(({ outcome, facts }) => {
      if (Result.isFailure(outcome)) {
        throw new SpecError(`expected ${this.what} to append facts, but it failed (${kindOf(outcome.failure)}): ${described(outcome.failure)}`)
      }
      const actual = drafts(facts)
      const wanted = drafts(expected.map((d) => Timer.record(d, this.timeBase)))
      if (!same(actual, wanted)) throw new SpecError(`${this.what} appended other facts than expected`, actual, wanted)
    })
  }

  /**
   * Expects the message (or fact) to fail with nothing appended; `match` is
   * checked against the error text; `{ permanent: true }` requires a
   * permanent failure (dead-lettered at once), `false` a transient one (retried).
   */
  thenFails(match?: string | RegExp, options: { readonly permanent?: boolean } = {}): Promise<void> {
    return this.result().then(({ outcome, facts }) => {
      if (Result.isSuccess(outcome)) throw new SpecError(`expected ${this.what} to fail, but it succeeded`, drafts(facts), "a failure")
      const { failure } = outcome
      if (!matches(failure.message, match)) throw new SpecError(`${this.what} failed with another error than expected`, described(failure), String(match))
      if (options.permanent !== undefined && options.permanent === failure.retryable) {
        throw new SpecError(`expected a ${options.permanent ? "permanent" : "transient"} failure of ${this.what}, got a ${failure.retryable ? "transient" : "permanent"} one: ${failure.message}`)
      }
      if (facts.length > 0) throw new SpecError(`${this.what} failed but appended facts`, drafts(facts), [])
    })
  }
}

/** A spec's layer in place of the module's, when the code requires services; none otherwise. */
type IsAny<T> = 0 extends 1 & T ? true : false
export type LayerOptions<Services> = IsAny<Services> extends true ? [options?: { readonly layer?: Module.AnyLayer }]
  : [Services] extends [never] ? [options?: { readonly layer?: Module.AnyLayer }]
  : [options: { readonly layer: Layer.Layer<Services, unknown, never> }]

class HandlerRun extends Run {
  protected readonly what: string
  protected readonly timeBase: string
  constructor(
    private readonly handler: Handler.Any,
    private readonly given: Given,
    private readonly message: Envelope,
    private readonly layer: Module.AnyLayer | undefined,
    private readonly elapsed?: Duration.Input
  ) {
    super()
    this.timeBase = message.created_at
    const name = `${handler._tag === "Decider" ? "decider" : "handler"} ${handler.name}`
    this.what = elapsed === undefined ? name : `the timers after ${name} and ${JSON.stringify(elapsed)}`
  }
  /** The facts the stream's timers (given, or just scheduled, less any cancelled) append once `duration` has passed since the message. */
  after(duration: Duration.Input): Run {
    return new HandlerRun(this.handler, this.given, this.message, this.layer, duration)
  }
  protected async execute(): Promise<Result_> {
    const { handler, message, elapsed, what } = this
    const platform = TestPlatform.make([Module.make("spec", { handlers: [handler], layer: this.layer })], { requireEmitters: false })
    await appendGiven(platform, message.tenant_id, message.subject, this.given)
    const routed = platform.registry.route(message, message.payload)
    if (Result.isFailure(routed)) return { outcome: Consumer.failed(new Failure.PermanentError({ reason: routed.failure.reason, message: `${routed.failure.message}: ${JSON.stringify(routed.failure.problems)}` })), facts: [] }
    const deliver = Effect.map(dispatch([{ key: "message", value: routed.success }]), (o) => o.get("message") ?? Consumer.done)
    const read = Effect.flatMap(Effect.service(Ledger), (ledger) => ledger.read({ tenant_id: message.tenant_id, stream: message.subject }))
    const run = Effect.gen(function*() {
      const { outcome, first } = yield* deliveredTwice(deliver, read, `${what} is not idempotent: delivering the same message again`)
      const caused = first.facts.filter((f) => f.causation_id === message.idempotency_key && f.caused_by === handler.name)
      if (elapsed === undefined || Result.isFailure(outcome)) return { outcome, facts: yield* opened(caused) }
      return { outcome, facts: yield* fireAfter(platform, message.tenant_id, message.subject, elapsed, what) }
    })
    // Only a spec with `after` runs on a TestClock (set to the message's time, from which its timers count).
    return platform.run(elapsed === undefined ? run : Effect.andThen(TestClock.setTime(Date.parse(message.created_at)), run).pipe(Effect.provide(TestClock.layer())))
  }
}

class Scenario {
  constructor(private readonly handler: Handler.Any, private readonly layer: Module.AnyLayer | undefined, private readonly facts: Given = []) {}
  /** Facts already in the message's stream (`Charge.make(…)`, built with `fact(…)`, or `Timer.schedule(…)`), in order. */
  given(facts: Given): Scenario {
    return new Scenario(this.handler, this.layer, [...this.facts, ...facts])
  }
  /** The message (`message(Definition, payload, { subject })`); `.after(duration)` for what the stream's timers append. */
  when(message: Envelope): Run & { readonly after: (duration: Duration.Input) => Run } {
    return new HandlerRun(this.handler, this.facts, message, this.layer)
  }
}

/** `HandlerSpec.for(handler)`, or `HandlerSpec.for(handler, { layer })` for one requiring services. */
export const HandlerSpec = {
  for: <H extends Handler.Any>(handler: H, ...[options]: LayerOptions<Handler.ServicesOf<H>>) => new Scenario(handler, options?.layer)
}
export const DeciderSpec = {
  for: <D extends Handler.Decider<any, any, any, any, any>>(decider: D, ...[options]: LayerOptions<Handler.ServicesOf<D>>) => new Scenario(decider, options?.layer),
  /** Its snapshots fold what its whole history folds, under today's `evolve` (SnapshotSpec). */
  checkSnapshot: SnapshotSpec.checkSnapshot
}

class ProcessorRun extends Run {
  protected readonly what: string
  protected readonly timeBase: string
  constructor(
    private readonly processor: Processor.Any,
    private readonly given: Given,
    private readonly parent: Fact,
    private readonly layer: Module.AnyLayer | undefined,
    private readonly elapsed?: Duration.Input
  ) {
    super()
    this.what = elapsed === undefined ? `processor ${processor.name}` : `processor ${processor.name}'s timers after ${JSON.stringify(elapsed)}`
    this.timeBase = parent.created_at
  }
  /** The facts the stream's timers (given, or the processor's) append once `duration` has passed since the fact (a `TestClock` moved on). */
  after(duration: Duration.Input): Run {
    return new ProcessorRun(this.processor, this.given, this.parent, this.layer, duration)
  }
  protected async execute(): Promise<Result_> {
    const { processor, parent: built, elapsed, what } = this
    const platform = TestPlatform.make([Module.make("spec", { processors: [processor], layer: this.layer })], { requireEmitters: false })
    await appendGiven(platform, built.tenant_id, built.stream, [...this.given, built])
    // The fact as stored after the given ones (its sequence the ledger's): what a processor reading its stream folds up to.
    const parent = (await readStream(platform, built.tenant_id, built.stream)).facts.find((f) => f.fact_id === built.fact_id) ?? built
    const read = Effect.flatMap(Effect.service(Ledger), (ledger) => ledger.read({ tenant_id: parent.tenant_id, stream: parent.stream }))
    const deliver = Effect.map(ProcessingConsumer.process([{ key: "fact", value: { fact: parent } }]), (o) => o.get("fact") ?? Consumer.done)
    return platform.run(Effect.gen(function*() {
      // The clock stands at the fact's time: a timer's `after` counts from there.
      yield* TestClock.setTime(Date.parse(parent.created_at))
      const { outcome, first } = yield* deliveredTwice(deliver, read, `${what} is not idempotent: delivering the same fact again`)
      const caused = first.facts.filter((f) => f.causation_id === parent.fact_id && f.caused_by === processor.name)
      if (elapsed === undefined || Result.isFailure(outcome)) return { outcome, facts: yield* opened(caused) }
      return { outcome, facts: yield* fireAfter(platform, parent.tenant_id, parent.stream, elapsed, what) }
    }).pipe(Effect.provide(TestClock.layer())))
  }
}

class ProcessorScenario {
  constructor(private readonly processor: Processor.Any, private readonly layer: Module.AnyLayer | undefined, private readonly facts: Given = []) {}
  /**
   * Facts already in the fact's stream before it (`Started.make(…)`, `fact(…)`, `Timer.schedule(…)`), in order:
   * what a processor declaring `reads` folds, and timers that `after` may fire.
   */
  given(facts: Given): ProcessorScenario {
    return new ProcessorScenario(this.processor, this.layer, [...this.facts, ...facts])
  }
  /** The fact the processor receives (`fact(Outcome, data, { stream })`); `.after(duration)` for what the stream's timers append. */
  when(fact: Fact): Run & { readonly after: (duration: Duration.Input) => Run } {
    return new ProcessorRun(this.processor, this.facts, fact, this.layer)
  }
}

/** `ProcessorSpec.for(processor)`, or `ProcessorSpec.for(processor, { layer })` for one requiring services. */
export const ProcessorSpec = {
  for: <P extends Processor.Any>(processor: P, ...[options]: LayerOptions<Processor.ServicesOf<P>>) => new ProcessorScenario(processor, options?.layer)
}

export { ProjectionSpec } from "./ProjectionSpec.js"
