/**
 * Test instrumentation: counting wrappers (shared with the benchmark, from
 * `@factline/core/testing`) and a MessageBatch wrapper that records retry delays.
 */
import * as CountingBindings from "@factline/core/testing/bindings"

export type Counts = CountingBindings.Counts
export const countingD1 = CountingBindings.d1
export const countingNamespace = CountingBindings.durableObjects
export const newCounts = CountingBindings.make

/**
 * The test MessageBatch of `createMessageBatch` records that a message was
 * retried but not the `delaySeconds` it was asked for; this wrapper records
 * the options too and forwards every call to the real message.
 */
export const recordingBatch = <B>(batch: MessageBatch<B>) => {
  const retries = new Map<string, QueueRetryOptions | undefined>()
  const messages = batch.messages.map((m) => ({
    get id() { return m.id },
    get timestamp() { return m.timestamp },
    get attempts() { return m.attempts },
    get body() { return m.body },
    ack: () => m.ack(),
    retry: (options?: QueueRetryOptions) => {
      retries.set(m.id, options)
      m.retry(options)
    }
  }))
  const recorded: MessageBatch<B> = {
    queue: batch.queue,
    metadata: (batch as any).metadata,
    messages: messages as unknown as ReadonlyArray<Message<B>>,
    ackAll: () => batch.ackAll(),
    retryAll: (options?: QueueRetryOptions) => batch.retryAll(options)
  } as MessageBatch<B>
  return { batch: recorded, retries }
}
