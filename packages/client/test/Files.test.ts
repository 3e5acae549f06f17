/**
 * The file routes (`Files`): an upload streams its file once, with its length and media type, to the path its
 * endpoint describes; a name its path schema refuses is refused before sending; a download is the answer's
 * stream, unread and with no time limit; any other answer is Api's typed error. The platform is a recording
 * `fetch` here (the real routes run in apps/example's browser.mjs, through `factline import` and `export`).
 */
import { describe, expect, it } from "vitest"
import { Conflict, Files, InvalidRequest, Unavailable } from "../src/index.js"

interface Sent {
  readonly url: string
  readonly init: RequestInit
}

const recording = (answers: Array<() => Response>) => {
  const sent: Array<Sent> = []
  const fetch = async (url: string, init: RequestInit) => {
    sent.push({ url, init })
    return answers.shift()!()
  }
  return { sent, fetch }
}

const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } })

const bytes = (text: string) => new TextEncoder().encode(text)

describe("Files", () => {
  it("an upload streams the file itself, once, with its length and media type, and reads the answer by the endpoint's schema", async () => {
    const { sent, fetch } = recording([() => json(201, { manifest: "t1/uploads/day-1.ndjson", size: 4 }), () => json(503, { error: { code: "unavailable", message: "R2 is unavailable" } })])
    const config = { baseUrl: "https://factline.test", token: "tok", fetch, retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 1 } }
    const stream = new ReadableStream<Uint8Array>({ start: (c) => (c.enqueue(bytes("{}\n{}")), c.close()) })
    expect(await Files.upload(config, { params: { name: "day-1.ndjson" }, file: { stream, length: 4 } })).toEqual({ manifest: "t1/uploads/day-1.ndjson", size: 4 })
    const headers = new Headers(sent[0]!.init.headers)
    expect([sent[0]!.url, sent[0]!.init.method, headers.get("content-type"), headers.get("content-length"), headers.get("authorization")])
      .toEqual(["https://factline.test/v1/uploads/day-1.ndjson", "PUT", "application/x-ndjson", "4", "Bearer tok"])
    // The stream itself is the body (nothing read into memory first).
    expect(sent[0]!.init.body).toBe(stream)
    // A stream can be read once: a 503 is not retried, whatever the retry settings.
    const again = new ReadableStream<Uint8Array>({ start: (c) => (c.enqueue(bytes("{}")), c.close()) })
    await expect(Files.upload(config, { params: { name: "day-2.ndjson" }, file: { stream: again, length: 2 } })).rejects.toBeInstanceOf(Unavailable)
    expect(sent).toHaveLength(2)
  })

  it("a name the endpoint's path schema refuses is InvalidRequest naming it, and nothing is sent", async () => {
    const { sent, fetch } = recording([])
    const refused = await Files.upload({ baseUrl: "https://factline.test", token: "tok", fetch }, { params: { name: "../etc/passwd" }, file: { stream: bytes("{}"), length: 2 } }).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(InvalidRequest)
    expect(refused).toMatchObject({ status: 0, problems: [{ path: "name", message: expect.stringContaining("letters, digits") }] })
    expect(sent).toHaveLength(0)
  })

  it("a download is the answer's stream, read as it arrives with no time limit; a refusal is its typed error", async () => {
    // The second part comes after the per-attempt timeout of a JSON call has long passed.
    const slow = () => new Response(new ReadableStream<Uint8Array>({
      start: (c) => c.enqueue(bytes('{"n":1}\n')),
      pull: (c) => new Promise<void>((resolve) => setTimeout(() => (c.enqueue(bytes('{"n":2}\n')), c.close(), resolve()), 300))
    }), { status: 200, headers: { "content-type": "application/x-ndjson" } })
    const { sent, fetch } = recording([slow, () => json(409, { error: { code: "conflict", message: "the job has no output yet" } })])
    const config = { baseUrl: "https://factline.test", token: "tok", fetch, timeoutMs: 50, retry: { maxAttempts: 1 } }
    const stream = await Files.download(config, { params: { id: "b 1" } })
    expect(await new Response(stream).text()).toBe('{"n":1}\n{"n":2}\n')
    expect([sent[0]!.url, sent[0]!.init.method, sent[0]!.init.signal]).toEqual(["https://factline.test/v1/batches/b%201/output", "GET", undefined])
    await expect(Files.download(config, { params: { id: "b_2" } })).rejects.toBeInstanceOf(Conflict)
  })
})
