/**
 * The service calls a workflow's body makes, seen by the test kit's `WorkflowSpec`: the module's layer (or the
 * spec's) is built once and each of its services wrapped so that every call of a method (every run of the Effect
 * it returns) is recorded, with the step that made it. The wrapper inherits the service, so what is not a method
 * reads through. It records; it judges nothing (the spec does).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Module from "../definitions/Module.js"
import { json } from "./SpecError.js"

/** A call of a method of one of the module's services. */
export interface ServiceCall {
  /** The service (the last part of its key: `CrmClient`). */
  readonly service: string
  readonly method: string
  readonly args: ReadonlyArray<unknown>
  /** The step whose callback made it, or null: the body made it outside any step. */
  readonly step: string | null
  readonly attempt: number | "redelivered" | null
  /** The first run, the replay, or a step's redelivered attempt. */
  readonly phase: "run" | "replay" | "redelivery"
}

/** What a wrapper records of one call; the spec adds the step and phase. */
export type Seen = Pick<ServiceCall, "service" | "method" | "args">

const serviceName = (key: string) => key.split("/").at(-1) ?? key
const copy = (args: ReadonlyArray<unknown>): ReadonlyArray<unknown> => {
  try {
    return json(args)
  } catch {
    return args.map(String)
  }
}

/** Each function and Effect of `service` wrapped to record its calls (the wrapper inherits the rest). */
const recorded = (key: string, service: unknown, record: (call: Seen) => void): unknown => {
  if (typeof service !== "object" || service === null || Effect.isEffect(service)) return service
  const wrapper = Object.create(service) as Record<string, unknown>
  const names = new Set<string>()
  for (let o: object | null = service; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const name of Object.getOwnPropertyNames(o)) if (name !== "constructor") names.add(name)
  }
  const service_ = serviceName(key)
  for (const method of names) {
    const value = (service as Record<string, unknown>)[method]
    if (Effect.isEffect(value)) {
      wrapper[method] = Effect.suspend(() => (record({ service: service_, method, args: [] }), value))
    } else if (typeof value === "function") {
      wrapper[method] = (...args: Array<unknown>) => {
        const result = (value as (...a: Array<unknown>) => unknown).apply(service, args)
        if (!Effect.isEffect(result)) {
          record({ service: service_, method, args: copy(args) })
          return result
        }
        return Effect.suspend(() => (record({ service: service_, method, args: copy(args) }), result))
      }
    }
  }
  return wrapper
}

/** The layer with each of its services' calls recorded. */
export const recording = (layer: Module.AnyLayer, record: (call: Seen) => void): Module.AnyLayer =>
  Layer.effectContext(Effect.map(Layer.build(layer), (context) =>
    Context.makeUnsafe(new Map([...context.mapUnsafe].map(([key, service]) => [key, recorded(key, service, record)]))))) as Module.AnyLayer

/** A call as a failure message names it: `CrmClient.request(["POST","/contacts",…])`. */
export const noted = (call: ServiceCall) => `${call.service}.${call.method}(${JSON.stringify(call.args)})`
