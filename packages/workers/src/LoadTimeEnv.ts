/**
 * The composition's second door, for the one setting needed before any request (or `env` argument) exists:
 * `FACTLINE_LOCAL_DEVELOPMENT`, read through `cloudflare:workers`' `env` when the Worker's module loads —
 * whether a refused registry is answered rather than thrown (Platform.ts). Kept apart from Services.ts so
 * that module stays importable in Node (its tests), where `cloudflare:workers` does not exist.
 */
import { env as workerEnv } from "cloudflare:workers"

export const localDevelopmentAtLoad = (): boolean => {
  try {
    return (workerEnv as { readonly FACTLINE_LOCAL_DEVELOPMENT?: unknown } | undefined)?.FACTLINE_LOCAL_DEVELOPMENT === "true"
  } catch {
    return false
  }
}
