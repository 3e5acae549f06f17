/**
 * Reads a JSON request body safely: bytes are counted while the body streams in
 * (whatever `content-length` or `transfer-encoding` say) and reading stops at
 * the limit; the bytes must be valid UTF-8 and no string (key or value) may
 * hold a lone surrogate (`"\ud800"`), which would otherwise be mangled into
 * U+FFFD on the way to storage and make two keys or subjects collide. Arrays
 * and objects may nest at most `maxDepth` levels: checked on the text before it
 * is parsed, since walking (or hashing, or cloning onto a queue) a value nested
 * thousands of levels deep exhausts the stack — a 400, not a 500.
 *
 * `readJson` is what the edge (Serve.ts) calls for a route with a JSON payload: the content type, then the limits, its refusal thrown as a
 * member of the failure family (415/413 `RequestRefused`, 400 `InvalidInput`). It does not interpret the
 * JSON: the routes validate what they read.
 */
import { Failure } from "@factline/core"
import { Issues } from "@factline/schemas"
import { RequestRefused } from "./Problem.js"

/** Levels of arrays and objects a body may nest (an envelope uses 3 or 4; a payload gets the rest). */
export const maxDepth = 64

export interface Refusal {
  readonly status: 400 | 413
  readonly code: "payload_too_large" | "invalid_utf8" | "invalid_json" | "invalid_string" | "too_deep"
  readonly message: string
  readonly details?: { readonly problems: ReadonlyArray<{ path: string; message: string }> }
}

export type Read = { readonly _tag: "Ok"; readonly value: unknown } | { readonly _tag: "Refused"; readonly refusal: Refusal }

const tooLarge = (maxBytes: number): Read => ({
  _tag: "Refused",
  refusal: { status: 413, code: "payload_too_large", message: `request body is over ${maxBytes} bytes` }
})

/** The body's bytes, or `undefined` once more than `maxBytes` arrived (the rest is not read). */
const readBytes = async (request: Request, maxBytes: number): Promise<Uint8Array | undefined> => {
  const declared = Number(request.headers.get("content-length") ?? "0")
  if (declared > maxBytes) return undefined
  if (request.body === null) return new Uint8Array()
  const reader = request.body.getReader()
  const parts: Array<Uint8Array> = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined)
      return undefined
    }
    parts.push(value)
  }
  const bytes = new Uint8Array(total)
  let offset = 0
  for (const part of parts) {
    bytes.set(part, offset)
    offset += part.byteLength
  }
  return bytes
}

const loneSurrogate = /\p{Surrogate}/u
const replacement = /\uFFFD/

/**
 * Names the fields holding the invalid bytes, when that can be told: decoded
 * leniently, each invalid sequence becomes U+FFFD, so if the body held no real
 * U+FFFD (bytes EF BF BD) every string with one is at fault.
 */
const invalidUtf8Fields = (bytes: Uint8Array): Array<{ path: string; message: string }> => {
  const message = "contains bytes that are not valid UTF-8"
  for (let i = 0; i + 2 < bytes.length; i++) {
    if (bytes[i] === 0xef && bytes[i + 1] === 0xbf && bytes[i + 2] === 0xbd) return [{ path: "", message }]
  }
  let value: unknown
  try {
    const lenient = new TextDecoder("utf-8", { fatal: false, ignoreBOM: false }).decode(bytes)
    if (depthOf(lenient, maxDepth) > maxDepth) return [{ path: "", message }]
    value = JSON.parse(lenient)
  } catch {
    return [{ path: "", message }]
  }
  const out: Array<{ path: string; message: string }> = []
  const walk = (v: unknown, path: Array<string | number>) => {
    if (typeof v === "string") {
      if (replacement.test(v)) out.push({ path: path.join("."), message })
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => walk(item, [...path, i]))
    } else if (v !== null && typeof v === "object") {
      for (const [key, item] of Object.entries(v)) {
        if (replacement.test(key)) out.push({ path: [...path, key].join("."), message: `the field name ${message}` })
        walk(item, [...path, key])
      }
    }
  }
  walk(value, [])
  return out.length > 0 ? out : [{ path: "", message }]
}

/** Every string (object keys included) holding a lone surrogate, by path. */
const surrogates = (value: unknown, path: Array<string | number>, out: Array<{ path: string; message: string }>) => {
  const here = () => path.join(".")
  if (typeof value === "string") {
    if (loneSurrogate.test(value)) out.push({ path: here(), message: "contains a lone UTF-16 surrogate (not valid Unicode text)" })
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => surrogates(v, [...path, i], out))
  } else if (value !== null && typeof value === "object") {
    for (const [key, v] of Object.entries(value)) {
      if (loneSurrogate.test(key)) out.push({ path: [...path, key].join("."), message: "the field name contains a lone UTF-16 surrogate" })
      surrogates(v, [...path, key], out)
    }
  }
}

/** The deepest nesting of arrays and objects in JSON text (strings skipped), stopping past `limit`. */
export const depthOf = (text: string, limit: number): number => {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // backslash: skip the escaped character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > deepest && (deepest = depth) > limit) return deepest
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return deepest
}

export const read = async (request: Request, maxBytes: number): Promise<Read> => {
  const bytes = await readBytes(request, maxBytes)
  if (bytes === undefined) return tooLarge(maxBytes)
  let text: string
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes)
  } catch {
    return { _tag: "Refused", refusal: { status: 400, code: "invalid_utf8", message: "the request body is not valid UTF-8; nothing was accepted", details: { problems: invalidUtf8Fields(bytes) } } }
  }
  if (depthOf(text, maxDepth) > maxDepth) {
    return {
      _tag: "Refused",
      refusal: { status: 400, code: "too_deep", message: `the request body nests arrays and objects more than ${maxDepth} levels deep; nothing was accepted` }
    }
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { _tag: "Refused", refusal: { status: 400, code: "invalid_json", message: "the request body is not valid JSON" } }
  }
  const problems: Array<{ path: string; message: string }> = []
  surrogates(value, [], problems)
  if (problems.length > 0) {
    return {
      _tag: "Refused",
      refusal: { status: 400, code: "invalid_string", message: `strings that are not valid Unicode text: ${Issues.summary(problems.length)}; nothing was accepted`, details: { problems } }
    }
  }
  return { _tag: "Ok", value }
}

/** A JSON body's limit: 5 MiB, counted while it streams in. */
export const maxBodyBytes = 5 * 1024 * 1024

/** What a JSON route reads. */
export const jsonContentTypes = ["application/json"]

/**
 * A web request's JSON body within `maxBodyBytes` (counted while streaming), or the refusal thrown. A body of
 * another content type (`text/plain`, a form, none) is a 415, before anything is read.
 */
export const readJson = async (request: Request, contentTypes: ReadonlyArray<string> = jsonContentTypes): Promise<unknown> => {
  const contentType = (request.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase()
  if (!contentTypes.includes(contentType)) {
    throw new RequestRefused({
      status: 415,
      message: `content-type must be ${contentTypes.join(" or ")}; got ${contentType === "" ? "none" : JSON.stringify(contentType.slice(0, 100))}`
    })
  }
  const body = await read(request, maxBodyBytes)
  if (body._tag === "Ok") return body.value
  const { status, code, message, details } = body.refusal
  throw status === 413
    ? new RequestRefused({ status, message })
    : new Failure.InvalidInput({ code, message, ...(details === undefined ? {} : { problems: details.problems }) })
}
