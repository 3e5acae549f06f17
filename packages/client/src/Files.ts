/**
 * The two routes whose body is a file, streamed: an import's NDJSON file up (`PUT /v1/uploads/:name`) and a
 * succeeded export down (`GET /v1/batches/:id/output`). They are raw routes of the API (docs/architecture.md,
 * "Raw handlers"): the description states them — the path, the path parameters' schema, the answer's schema
 * and errors — but the derived client (Api) would read a whole body into memory, and its calls time out after
 * 30 s. Here each is one authenticated `fetch` of the path its endpoint describes: the path parameters are
 * checked by the endpoint's schema before sending (a bad name is `InvalidRequest` with status 0, as in Api),
 * the file streams with no time limit, and an answer other than the success is the same typed error as Api's.
 *
 * An upload is sent once (a stream can be read once); a download is retried as any GET until its answer
 * starts (429, 5xx, network), then streams. It reads the answer of an upload by the endpoint's success
 * schema; a download is returned unread.
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { Batches } from "@factline/core/api"
import { Issues } from "@factline/schemas"
import * as Api from "./Api.js"
import { InvalidQuery, InvalidRequest, UnexpectedResponse } from "./ClientError.js"
import * as Transport from "./Transport.js"

/** A file to stream up, and its length (`content-length` is required). */
export interface File {
  readonly stream: ReadableStream<Uint8Array> | Uint8Array
  readonly length: number
}

/** What is read here of an endpoint's description. */
interface Described {
  readonly method: string
  readonly path: string
  readonly params: Schema.Top | undefined
  readonly success: ReadonlySet<Schema.Top>
}

/** The path `endpoint` describes with `params` in it, once its path schema accepts them (else the refusal, nothing sent). */
const pathOf = (endpoint: Described, params: Readonly<Record<string, string>>): string => {
  const what = `${endpoint.method} ${endpoint.path}`
  if (endpoint.params !== undefined) {
    const checked = Schema.decodeUnknownResult(endpoint.params as Schema.Codec<unknown, unknown>)(params, { errors: "all" })
    if (Result.isFailure(checked)) {
      const problems = Issues.fromIssue(checked.failure.issue)
      const common = { message: `${what}: refused before sending: ${Issues.render(problems)}; nothing was sent`, status: 0, problems }
      throw endpoint.method === "GET" ? new InvalidQuery(common) : new InvalidRequest(common)
    }
  }
  return endpoint.path.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(params[name] ?? ""))
}

/** `PUT /v1/uploads/:name`: the file streamed to the caller's tenant under `name`; resolves with the stored manifest and size. */
export const upload = async (config: Api.Config, request: { readonly params: { readonly name: string }; readonly file: File }): Promise<Api.Output<typeof Batches.upload>> => {
  const endpoint = Batches.upload
  const path = pathOf(endpoint, request.params)
  const answer = await Transport.request(Api.settings(config), { method: endpoint.method, path, body: request.file, contentType: Batches.uploadContentType })
  const what = `${endpoint.method} ${path}`
  if (answer.status < 200 || answer.status > 299) throw Api.refusal(endpoint.method, what, answer.status, answer.body)
  const read = Schema.decodeUnknownResult([...endpoint.success][0] as Schema.Codec<Api.Output<typeof Batches.upload>, unknown>)(answer.body, { errors: "all" })
  if (Result.isFailure(read)) {
    throw new UnexpectedResponse({ message: `${what}: ${answer.status} with a body this client does not read (${Issues.render(Issues.fromIssue(read.failure.issue))})`, status: answer.status, body: answer.body })
  }
  return read.success
}

/** `GET /v1/batches/:id/output`: a succeeded export's file, as the stream of its bytes (NDJSON or CSV, as exported). */
export const download = async (config: Api.Config, request: Api.Input<typeof Batches.batchOutput>): Promise<ReadableStream<Uint8Array>> => {
  const endpoint = Batches.batchOutput
  const path = pathOf(endpoint, request.params)
  const answer = await Transport.request(Api.settings(config), { method: endpoint.method, path, stream: true })
  const what = `${endpoint.method} ${path}`
  if (answer.status < 200 || answer.status > 299) throw Api.refusal(endpoint.method, what, answer.status, answer.body)
  if (answer.stream === undefined || answer.stream === null) throw new UnexpectedResponse({ message: `${what}: ${answer.status} without a body`, status: answer.status })
  return answer.stream
}
