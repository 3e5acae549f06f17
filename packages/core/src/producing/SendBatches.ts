/**
 * Splits messages into `sendBatch` calls within Cloudflare Queues' limits:
 * at most 100 messages and 256 KB per call. Sizes are the JSON byte length
 * plus a fixed per-message allowance for the envelope the platform adds.
 */
export const maxMessages = 100
export const maxBatchBytes = 256 * 1000
export const perMessageOverheadBytes = 100

const encoder = new TextEncoder()
export const sizeOf = (body: unknown): number => encoder.encode(JSON.stringify(body)).byteLength + perMessageOverheadBytes

/** Splits items into send calls; `bodyOf` picks the message body of an item (the item itself by default). */
export const split = <T>(items: ReadonlyArray<T>, bodyOf: (item: T) => unknown = (item) => item): Array<Array<T>> => {
  const batches: Array<Array<T>> = []
  let current: Array<T> = []
  let bytes = 0
  for (const body of items) {
    const size = sizeOf(bodyOf(body))
    if (current.length > 0 && (current.length === maxMessages || bytes + size > maxBatchBytes)) {
      batches.push(current)
      current = []
      bytes = 0
    }
    current.push(body)
    bytes += size
  }
  if (current.length > 0) batches.push(current)
  return batches
}

/** Sends every body with as few `sendBatch` calls as the limits allow, in order. */
export const sendAll = async <T>(queue: Queue<T>, bodies: ReadonlyArray<T>): Promise<number> => {
  const batches = split(bodies)
  for (const batch of batches) await queue.sendBatch(batch.map((body) => ({ body, contentType: "json" as const })))
  return batches.length
}
