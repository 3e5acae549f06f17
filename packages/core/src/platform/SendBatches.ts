/**
 * Cloudflare Queues' limits, and the splitting of messages into `sendBatch`
 * calls within them: at most 100 messages and 256 KB per call, at most 128 KB
 * a message. Sizes are the JSON byte length plus a fixed per-message allowance
 * for the envelope the platform adds. The queues' door (`Queues.send`) splits
 * with it; the others only measure (a producer deciding what to offload to R2,
 * a relay packing facts into messages).
 */
export const maxMessages = 100
export const maxBatchBytes = 256 * 1000
/** A message's limit, its allowance included. */
export const maxMessageBytes = 128 * 1000
export const perMessageOverheadBytes = 100

const encoder = new TextEncoder()
/** The scratch space `utf8Bytes` keeps at most: a message's worth (the queue's limit is 128 KB), at 3 bytes a unit. */
const maxScratchBytes = 3 * 128 * 1024
/** Scratch space `utf8Bytes` encodes into, grown as needed up to `maxScratchBytes`. */
let scratch = new Uint8Array(64 * 1024)

/** The UTF-8 byte length of a string, as `TextEncoder` writes it; up to a message's size, without allocating the bytes. */
export const utf8Bytes = (text: string): number => {
  // At most 3 bytes per UTF-16 unit: a scratch buffer that large takes the whole string in one call.
  const room = text.length * 3
  if (room > maxScratchBytes) return encoder.encode(text).byteLength
  if (scratch.length < room) scratch = new Uint8Array(room)
  return encoder.encodeInto(text, scratch).written
}

/** The JSON byte length of a message body plus the per-message allowance. */
export const sizeOf = (body: unknown): number => utf8Bytes(JSON.stringify(body)) + perMessageOverheadBytes

/**
 * Splits items into send calls; `bodyOf` picks the message body of an item (the item itself by default), and
 * `sizeOfItem` gives its size where the caller already knows it (default: `sizeOf` of its body).
 */
export const split = <T>(
  items: ReadonlyArray<T>,
  bodyOf: (item: T) => unknown = (item) => item,
  sizeOfItem: (item: T) => number = (item) => sizeOf(bodyOf(item))
): Array<Array<T>> => {
  const batches: Array<Array<T>> = []
  let current: Array<T> = []
  let bytes = 0
  for (const body of items) {
    const size = sizeOfItem(body)
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
