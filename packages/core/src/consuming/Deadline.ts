/**
 * The deadline of one consumer invocation: a consumer stops starting new work before the platform stops it.
 *
 * Cloudflare ends a queue consumer invocation at its CPU limit (30 s by default, `limits.cpu_ms` up to 5 min)
 * or after 15 minutes of wall time, whatever it was doing: a batch killed mid-way is retried whole by the
 * platform, its messages' attempts spent, and the work in flight is lost. Instead, `Consumer.run` sets a
 * deadline (`FACTLINE_CONSUMER_BUDGET_MS` after the invocation starts) and the consumers check it between their
 * units of work — a chunk message of the batch queue, a read database of the projections, a re-decide round
 * of the events consumer. Work not started when it has passed is handed back (`handedBack`): the consumer
 * retries those messages and acks the ones whose work is done; nothing half-done is acked.
 *
 * The budget is wall-clock time: a Worker cannot read its own CPU time (workerd exposes no CPU clock, and
 * its `Date.now()` only moves across I/O). A wall-clock budget bounds CPU as well, since an invocation's CPU
 * time never exceeds its wall time; a budget under the CPU limit therefore stops before both limits.
 *
 * The first unit of every invocation always runs — the check is between units, never before the first — so
 * each invocation makes progress however slow its work: the budget only keeps the next unit from starting.
 * A unit already started runs to its end (the budget's margin below the limit is for it and for settling the
 * batch). Outside a consumer (no deadline provided) nothing has passed.
 *
 * It does not measure or cancel anything in flight, and reads the clock (Effect's `Clock`, which tests move)
 * once per check: a check per unit, never per message.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { FailureReason } from "@factline/schemas"
import * as Failure from "../failures/Failure.js"

/**
 * The default budget: 20 s of wall time, two thirds of Cloudflare's default CPU limit (30 s), so an invocation
 * that spends all of it on CPU still stops with 10 s to finish its unit in flight and settle its batch. A Worker
 * with a higher `limits.cpu_ms` may raise `FACTLINE_CONSUMER_BUDGET_MS` to about two thirds of it — and keep it
 * well under the 15-minute wall limit (10 minutes at most).
 */
export const defaultBudgetMs = 20_000

/**
 * The budget of each consumer invocation, in milliseconds from its batch's start (`FACTLINE_CONSUMER_BUDGET_MS`:
 * the Worker provides it around each batch; `defaultBudgetMs` otherwise). 0 hands back everything after the
 * first unit (tests).
 */
export const Budget = Context.Reference<number>("@factline/core/consuming/Deadline/Budget", { defaultValue: () => defaultBudgetMs })

/** When the current invocation's deadline passes, in epoch milliseconds (`Infinity`: none). */
export const Deadline = Context.Reference<{ readonly at: number }>("@factline/core/consuming/Deadline", {
  defaultValue: () => ({ at: Number.POSITIVE_INFINITY })
})

/** Runs `effect` with a deadline `budgetMs` after `startedAt` (epoch milliseconds). */
export const within = (startedAt: number, budgetMs: number) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(effect, Deadline, { at: startedAt + budgetMs })

/** Whether the current invocation's deadline has passed: one clock read (none outside a consumer). */
export const passed: Effect.Effect<boolean> = Effect.flatMap(Effect.service(Deadline), ({ at }) =>
  at === Number.POSITIVE_INFINITY ? Effect.succeed(false) : Effect.map(Clock.currentTimeMillis, (now) => now >= at))

/**
 * Work not started because the invocation's deadline had passed: retryable (the consumer retries the message
 * at once, without the queue's backoff — it did not fail — or, on its last allowed attempt, sends it again so
 * that it is never dead-lettered for want of time).
 */
export class HandedBack extends Schema.TaggedError<HandedBack>()("HandedBack", { message: Schema.String }) {
  readonly [Failure.TypeId] = Failure.TypeId
  get status() { return 503 }
  get code() { return "unavailable" }
  get retryable() { return true }
  get reason(): FailureReason { return "retries_exhausted" }
  get publicMessage() { return "retry later" }
}

export const isHandedBack = (failure: Failure.Failure): boolean => failure instanceof HandedBack

/** The outcome of an item whose work was not started: handed back to the queue. */
export const handedBack: Result.Result<void, Failure.Failure> = Result.fail(
  new HandedBack({ message: "handed back unstarted: the consumer invocation's time budget (FACTLINE_CONSUMER_BUDGET_MS) was spent" })
)

/**
 * `run` over units in turn (each call one unit: a database's items, a round): the first call always runs, each
 * later one only while the deadline has not passed — else its items are handed back unstarted. One guard per
 * batch (it counts its calls).
 */
export const guarded = <T, E, R>(
  run: (items: ReadonlyArray<T>) => Effect.Effect<ReadonlyMap<string, Result.Result<void, Failure.Failure>>, E, R>,
  keyOf: (item: T) => string
) => {
  let calls = 0
  return (items: ReadonlyArray<T>): Effect.Effect<ReadonlyMap<string, Result.Result<void, Failure.Failure>>, E, R> =>
    Effect.suspend(() =>
      calls++ === 0
        ? run(items)
        : Effect.flatMap(passed, (over) => (over ? Effect.succeed(new Map(items.map((item) => [keyOf(item), handedBack] as const))) : run(items))))
}
