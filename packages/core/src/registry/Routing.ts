/**
 * The registry's run-time reads over its tables: routing an envelope to its handler (decode + upcast, saying
 * precisely why a message cannot be routed) and bringing a stored fact to its type's latest shape (the
 * upcaster chain; a version newer than the code is refused). Pure; the tables are Registrations'.
 */
import * as Result from "effect/Result"
import type { Envelope, Fact } from "@factline/schemas"
import type * as FactDefinition from "../definitions/FactDefinition.js"
import type * as Handler from "../definitions/Handler.js"
import { PermanentError } from "../failures/Failure.js"
import type { FailureReason, Issues } from "@factline/schemas"

export interface Routed {
  readonly handler: Handler.Any
  readonly message: Handler.Message<unknown>
}

export interface RouteFailure {
  readonly reason: Extract<FailureReason, "unknown_message_type" | "unsupported_version" | "decode_error">
  readonly message: string
  readonly problems: ReadonlyArray<Issues.Problem>
}

/** The message of a fact that cannot be brought to its type's latest shape: type, version, id, what to do. */
const notReadable = (fact: Fact, problem: FactDefinition.UpcastProblem): PermanentError =>
  new PermanentError({
    reason: problem._tag === "UnsupportedVersion" ? "unsupported_version" : "permanent_failure",
    message: problem._tag === "UnsupportedVersion"
      ? `fact ${fact.fact_id} (${fact.type}) has schema_version ${fact.schema_version ?? 1}, which this code does not know: ${problem.message}; deploy the code that defines it, then replay this dead letter`
      : `fact ${fact.fact_id} (${fact.type}, schema_version ${fact.schema_version ?? 1}) cannot be upcast: ${problem.message}; fix the upcaster, then replay this dead letter`
  })

/** Routes an envelope whose payload is already loaded, by the handlers of `Registrations.handlersOf`. */
export const route = (handlers: ReadonlyMap<string, { readonly handler: Handler.Any }>) => (envelope: Envelope, payload: unknown): Result.Result<Routed, RouteFailure> => {
  const entry = handlers.get(envelope.message_type)
  if (!entry) {
    return Result.fail({
      reason: "unknown_message_type",
      message: `no handler is registered for message_type "${envelope.message_type}"`,
      problems: [{ path: "message_type", message: `unknown message type "${envelope.message_type}"` }]
    })
  }
  const decoded = entry.handler.message.decode(envelope.schema_version, payload)
  if (Result.isFailure(decoded)) {
    const problem = decoded.failure
    return Result.fail(
      problem._tag === "UnsupportedVersion"
        ? { reason: "unsupported_version", message: problem.message, problems: [{ path: "schema_version", message: problem.message }] }
        : { reason: "decode_error", message: `invalid ${envelope.message_type} payload`, problems: problem.problems }
    )
  }
  return Result.succeed({
    handler: entry.handler,
    message: {
      payload: decoded.success,
      messageType: envelope.message_type,
      receivedSchemaVersion: envelope.schema_version,
      messageId: envelope.message_id,
      idempotencyKey: envelope.idempotency_key,
      correlationId: envelope.correlation_id,
      causationId: envelope.causation_id,
      tenantId: envelope.tenant_id,
      subject: envelope.subject,
      source: envelope.source,
      createdAt: envelope.created_at,
      traceparent: envelope.traceparent
    }
  })
}

/** A stored fact in its type's latest shape, by the definitions the registry can upcast with. */
export const latest = (readable: ReadonlyMap<string, FactDefinition.Any>) => (fact: Fact): Result.Result<Fact, PermanentError> => {
  const definition = readable.get(fact.type)
  const stored = fact.schema_version ?? 1
  if (definition === undefined || stored === definition.latestVersion) return Result.succeed(fact)
  const upcast = definition.upcast(stored, fact.data)
  return Result.isFailure(upcast)
    ? Result.fail(notReadable(fact, upcast.failure))
    : Result.succeed({ ...fact, data: upcast.success as Record<string, unknown>, schema_version: definition.latestVersion })
}
