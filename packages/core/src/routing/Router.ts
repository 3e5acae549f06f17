/**
 * The router: from `message_type` to the one handler registered for it.
 *
 * Built once from modules at startup; two handlers for one type, or two
 * different definitions under one name, is a configuration error thrown
 * there, not a surprise at run time. `route` decodes and upcasts a payload and
 * says precisely why a message cannot be routed. It does not run handlers.
 */
import { Result } from "effect"
import type { Envelope, FailureReason, Issues } from "@factline/schemas"
import type * as Handler from "./Handler.js"
import type { MessageDefinition } from "./MessageDefinition.js"
import type { Module } from "./Module.js"
import type { Processor } from "../processing/Processor.js"
import type { Projection } from "../projections/Projection.js"

export class RouterConfigError extends Error {
  override readonly name = "RouterConfigError"
}

export interface Routed {
  readonly handler: Handler.Any
  readonly message: Handler.Message<unknown>
}

export interface RouteFailure {
  readonly reason: Extract<FailureReason, "unknown_message_type" | "unsupported_version" | "decode_error">
  readonly message: string
  readonly problems: ReadonlyArray<Issues.Problem>
}

export interface Router {
  readonly modules: ReadonlyArray<Module>
  readonly definitions: ReadonlyMap<string, MessageDefinition>
  readonly handlerFor: (messageType: string) => Handler.Any | undefined
  /** The processors registered for a fact type (several may listen to one type). */
  readonly processorsFor: (factType: string) => ReadonlyArray<Processor>
  readonly projections: ReadonlyArray<Projection>
  readonly projection: (name: string) => Projection | undefined
  /**
   * Where a fact of this type is relayed: always to projections (the `facts`
   * projection copies every fact), to fact-processing only if a processor listens.
   */
  readonly destinationsFor: (factType: string) => ReadonlyArray<string>
  /** Routes an envelope whose payload is already loaded (`payload_ref` resolved). */
  readonly route: (envelope: Envelope, payload: unknown) => Result.Result<Routed, RouteFailure>
}

const projectionsOnly: ReadonlyArray<string> = ["factline-projections"]
const withProcessing: ReadonlyArray<string> = ["factline-projections", "factline-fact-processing"]

export const make = (modules: ReadonlyArray<Module>): Router => {
  const handlers = new Map<string, { handler: Handler.Any; module: string }>()
  const names = new Map<string, string>()
  for (const module of modules) {
    for (const handler of module.handlers) {
      const type = handler.message.messageType
      const existing = handlers.get(type)
      if (existing) {
        throw new RouterConfigError(
          `two handlers for message type "${type}": "${existing.handler.name}" (module ${existing.module}) and "${handler.name}" (module ${module.name})`
        )
      }
      const sameName = names.get(handler.name)
      if (sameName) {
        throw new RouterConfigError(`handler name "${handler.name}" is used twice (modules ${sameName} and ${module.name}); fact ids depend on it`)
      }
      handlers.set(type, { handler, module: module.name })
      names.set(handler.name, module.name)
    }
  }
  const processors = new Map<string, Array<Processor>>()
  const projections = new Map<string, Projection>()
  for (const module of modules) {
    for (const processor of module.processors) {
      const sameName = names.get(processor.name)
      if (sameName) throw new RouterConfigError(`processor name "${processor.name}" is already used (module ${sameName}); fact ids depend on it`)
      names.set(processor.name, module.name)
      processors.set(processor.factType, [...(processors.get(processor.factType) ?? []), processor])
    }
    for (const projection of module.projections) {
      if (projection.name === "facts" || projections.has(projection.name)) {
        throw new RouterConfigError(`projection name "${projection.name}" is used twice (or is the built-in "facts")`)
      }
      projections.set(projection.name, projection)
    }
  }
  const definitions = new Map<string, MessageDefinition>([...handlers].map(([type, h]) => [type, h.handler.message]))

  const route = (envelope: Envelope, payload: unknown): Result.Result<Routed, RouteFailure> => {
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
        createdAt: envelope.created_at
      }
    })
  }

  return {
    modules,
    definitions,
    handlerFor: (t) => handlers.get(t)?.handler,
    processorsFor: (t) => processors.get(t) ?? [],
    projections: [...projections.values()],
    projection: (name) => projections.get(name),
    destinationsFor: (t) => (processors.has(t) ? withProcessing : projectionsOnly),
    route
  }
}
