/**
 * The `traceparent` header (W3C Trace Context) of `POST /v1/events`.
 *
 * A valid header is the trace of every event of the request that has no
 * `traceparent` of its own (the envelope field, or a CloudEvent's
 * `traceparent` extension attribute); without one the request starts a new
 * trace. An invalid header is refused — a 400 naming it — rather than
 * silently replaced, so a caller's broken propagation shows at once. The 202
 * answers with the request's trace in a `traceparent` header when an
 * accepted event carries it (each item of the body names its own). Checking
 * each event's own value is the producer's (it names `events.3.traceparent`).
 */
import { TraceContext } from "@factline/schemas"

export const header = "traceparent"

export type RequestTrace =
  | { readonly ok: true; readonly traceparent: string }
  | { readonly ok: false; readonly message: string; readonly problems: ReadonlyArray<{ readonly path: string; readonly message: string }> }

/** The request's trace: its valid `traceparent` header, or a new trace when it has none. */
export const ofRequest = (headers: Headers): RequestTrace => {
  const given = headers.get(header)
  if (given === null) return { ok: true, traceparent: TraceContext.generate() }
  if (TraceContext.isValid(given)) return { ok: true, traceparent: given }
  return {
    ok: false,
    message: `the ${header} header ${TraceContext.formatMessage}`,
    problems: [{ path: `headers.${header}`, message: TraceContext.formatMessage }]
  }
}

/** The 202's `traceparent` header: the request's trace, when an accepted event carries it. */
export const responseHeaders = (
  traceparent: string,
  accepted: ReadonlyArray<{ readonly envelope: { readonly traceparent?: string | undefined } }>
): Record<string, string> => (accepted.some((item) => item.envelope.traceparent === traceparent) ? { [header]: traceparent } : {})
