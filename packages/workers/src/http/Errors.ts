/**
 * The one error shape of the HTTP API, `Problem` (Contract.ts): `{ error: { code, message, details? } }`.
 * Messages are written for the caller; internal errors never leak a stack or SQL.
 */
import type { Context } from "hono"
import type { ContentfulStatusCode } from "hono/utils/http-status"
import type { Problem } from "./Contract.js"

export const errorResponse = (
  c: Context<any>,
  status: ContentfulStatusCode,
  code: string,
  message: string,
  details?: unknown,
  headers?: Record<string, string>
) => c.json<Problem>({ error: details === undefined ? { code, message } : { code, message, details } }, status, headers)
