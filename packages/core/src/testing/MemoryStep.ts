/**
 * Cloudflare Workflows' step API in memory (`Engine.Step`), for the test kit's `WorkflowSpec`, with Cloudflare's
 * semantics: a step that completed keeps its result and answers it on every replay without running again; a
 * step whose callback throws is attempted again up to its policy's `limit` (retries after the first, each after
 * the policy's backoff delay), and its last error is kept once they are spent; a sleep is recorded and moves
 * time on; a wait is answered by the event delivered for its type, or times out (Cloudflare's
 * `WorkflowTimeoutError`) after moving time on by its timeout. Time moves through `advance` (the spec's
 * `TestClock`); nothing waits on the wall clock.
 *
 * It records every step it is asked for (`log`: answered from the store, or run, with its attempts), and keeps
 * the callback of each step that succeeded, so that a spec can attempt it once more, as Cloudflare may after an
 * attempt's answer was lost (`redeliver`). Per-attempt time limits (`timeout`) are not enforced.
 */
import type * as Engine from "../workflows/Engine.js"

/** One step as asked for: run (with its attempts and the delays before each retry), or answered from the store. */
export type Entry =
  | { readonly kind: "do"; readonly name: string; readonly replayed: boolean; readonly attempts: number; readonly delays: ReadonlyArray<number>; readonly succeeded: boolean }
  | { readonly kind: "sleep"; readonly name: string; readonly replayed: boolean; readonly ms: number }
  | { readonly kind: "wait"; readonly name: string; readonly replayed: boolean; readonly type: string; readonly timeoutMs: number; readonly answered: boolean }

/** The step and attempt whose callback runs now (none between steps). */
export interface Current {
  readonly step: string
  readonly attempt: number | "redelivered"
}

export interface Options {
  /** The event a `waitForEvent` of this type receives; none: the wait times out. */
  readonly event: (type: string) => { readonly payload: unknown } | undefined
  /** Moves time on by `ms` (a sleep, a wait that timed out, a retry's delay). */
  readonly advance: (ms: number) => Promise<void>
}

type Kept = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown }

/** The delay before retry `retry` (1 for the first) under a step's policy, as Cloudflare computes it. */
export const retryDelay = (retries: Engine.StepConfig["retries"], retry: number): number =>
  retries.backoff === "constant" ? retries.delay : retries.backoff === "linear" ? retries.delay * retry : retries.delay * 2 ** (retry - 1)

export class MemoryStep implements Engine.Step {
  readonly log: Array<Entry> = []
  /** The step whose callback runs now. */
  current: Current | undefined
  private readonly kept = new Map<string, Kept>()
  private readonly succeeded = new Map<string, () => Promise<unknown>>()

  constructor(private readonly options: Options) {}

  private answer<T>(kept: Kept): T {
    if (kept.ok) return kept.value as T
    throw kept.error
  }

  readonly do = async <T>(name: string, config: Engine.StepConfig, callback: () => Promise<T>): Promise<T> => {
    const kept = this.kept.get(name)
    if (kept !== undefined) {
      this.log.push({ kind: "do", name, replayed: true, attempts: 0, delays: [], succeeded: kept.ok })
      return this.answer(kept)
    }
    const delays: Array<number> = []
    let error: unknown
    for (let attempt = 1; attempt <= config.retries.limit + 1; attempt++) {
      if (attempt > 1) {
        const delay = retryDelay(config.retries, attempt - 1)
        delays.push(delay)
        await this.options.advance(delay)
      }
      this.current = { step: name, attempt }
      try {
        const value = await callback()
        this.kept.set(name, { ok: true, value })
        this.succeeded.set(name, callback)
        this.log.push({ kind: "do", name, replayed: false, attempts: attempt, delays, succeeded: true })
        return value
      } catch (thrown) {
        error = thrown
      } finally {
        this.current = undefined
      }
    }
    this.kept.set(name, { ok: false, error })
    this.log.push({ kind: "do", name, replayed: false, attempts: config.retries.limit + 1, delays, succeeded: false })
    throw error
  }

  readonly sleep = async (name: string, duration: number): Promise<void> => {
    const key = `sleep:${name}`
    if (this.kept.has(key)) {
      this.log.push({ kind: "sleep", name, replayed: true, ms: duration })
      return
    }
    await this.options.advance(duration)
    this.kept.set(key, { ok: true, value: undefined })
    this.log.push({ kind: "sleep", name, replayed: false, ms: duration })
  }

  readonly waitForEvent = async <T>(name: string, options: { readonly type: string; readonly timeout: number }): Promise<{ readonly payload: T; readonly type: string }> => {
    const key = `wait:${name}`
    const kept = this.kept.get(key)
    if (kept !== undefined) {
      this.log.push({ kind: "wait", name, replayed: true, type: options.type, timeoutMs: options.timeout, answered: kept.ok })
      return this.answer(kept)
    }
    const event = this.options.event(options.type)
    if (event === undefined) {
      await this.options.advance(options.timeout)
      const error = new Error(`WorkflowTimeoutError: waitForEvent ${name} (${options.type}) timed out after ${options.timeout} ms`)
      this.kept.set(key, { ok: false, error })
      this.log.push({ kind: "wait", name, replayed: false, type: options.type, timeoutMs: options.timeout, answered: false })
      throw error
    }
    const value = { payload: event.payload as T, type: options.type }
    this.kept.set(key, { ok: true, value })
    this.log.push({ kind: "wait", name, replayed: false, type: options.type, timeoutMs: options.timeout, answered: true })
    return value
  }

  /**
   * Records a sleep `effect/workflow` ran in memory, inside its step (`DurableClock.sleep` up to its
   * `inMemoryThreshold`, 60 seconds by default, is an Activity `DurableClock/<name>` that sleeps on the clock).
   */
  slept(name: string, ms: number): void {
    this.log.push({ kind: "sleep", name, replayed: false, ms })
  }

  /** The steps that succeeded, in the order they did. */
  get completed(): ReadonlyArray<string> {
    return [...this.succeeded.keys()]
  }

  /** Runs the callback of step `name` (one that succeeded) once more, as a redelivered attempt; its result or error. */
  async redeliver(name: string): Promise<{ readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown }> {
    const callback = this.succeeded.get(name)
    if (callback === undefined) throw new Error(`step ${name} has not succeeded: nothing to redeliver`)
    this.current = { step: name, attempt: "redelivered" }
    try {
      return { ok: true, value: await callback() }
    } catch (error) {
      return { ok: false, error }
    } finally {
      this.current = undefined
    }
  }
}
