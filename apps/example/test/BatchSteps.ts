/**
 * A batch operation run step by step in a test: its batch-queue messages caught instead of sent (`recordingBatchQueue`,
 * bound as BATCH_QUEUE), then delivered one at a time (`deliverSteps`) — a retried step delivered again — on whatever
 * bindings the test gives (ones that refuse a write: the resumable moves, splits and deletions).
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test"
import { expect } from "vitest"
import type { PlatformEnv } from "@factline/workers"
import { unique } from "./helpers.js"
import { platform } from "./worker.js"

/** A batch message caught on its way to the queue, with the delay it was sent with. */
export interface Step {
  readonly body: unknown
  readonly delaySeconds: number
}

/** A BATCH_QUEUE that records what is sent to it (`sent`) instead of sending it. */
export const recordingBatchQueue = () => {
  const sent: Array<Step> = []
  const queue = {
    send: async (body: unknown, options?: QueueSendOptions) => void sent.push({ body, delaySeconds: options?.delaySeconds ?? 0 }),
    sendBatch: async (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
      for (const m of messages) sent.push({ body: m.body, delaySeconds: m.delaySeconds ?? options?.delaySeconds ?? 0 })
    }
  }
  return { sent, queue }
}

/**
 * Delivers the recorded steps in turn, after each one's delay, to the platform's queue handler with `stepEnv` (whose
 * BATCH_QUEUE records the next ones into `sent`), until none is left: a step not acknowledged is delivered again with
 * its attempt count raised (fewer than 5 attempts a step, fewer than `maxSteps` steps). Returns how many deliveries
 * were retried.
 */
export const deliverSteps = async (sent: Array<Step>, stepEnv: PlatformEnv, maxSteps: number): Promise<number> => {
  let retried = 0
  for (let steps = 0; sent.length > 0; steps++) {
    expect(steps).toBeLessThan(maxSteps)
    const { body, delaySeconds } = sent.shift()!
    if (delaySeconds > 0) await new Promise((resolve) => setTimeout(resolve, delaySeconds * 1_000))
    for (let attempts = 1; ; attempts++) {
      expect(attempts).toBeLessThan(5)
      const batch = createMessageBatch("factline-batch", [{ id: unique("qm"), timestamp: new Date(), attempts, body }])
      const ctx = createExecutionContext()
      await platform.queue!(batch as any, stepEnv, ctx)
      if ((await getQueueResult(batch, ctx)).explicitAcks.length === 1) break
      retried++
    }
  }
  return retried
}
