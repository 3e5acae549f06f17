/**
 * The one error shape of the HTTP API: `{ error: { code, message, details? } }`.
 * Messages are written for the caller; internal errors never leak a stack or SQL.
 */
import type { Context } from "hono"
import type { ContentfulStatusCode } from "hono/utils/http-status"

export const errorResponse = (
  c: Context<any>,
  status: ContentfulStatusCode,
  code: string,
  message: string,
  details?: unknown,
  headers?: Record<string, string>
) => c.json({ error: details === undefined ? { code, message } : { code, message, details } }, status, headers)
