/**
 * @factline/core — the product API: what a product team's module imports. Message and fact definitions,
 * handlers and deciders, processors, timers, projections, webhooks and modules; the failures a handler
 * returns; the registry the modules are checked into; and the producer a service emits events with. The
 * test kit is `@factline/core/testing`, the definitions alone (no runtime, for a browser or the typed client)
 * `@factline/core/definitions`.
 *
 * It does not export the runtime that runs these definitions (consumers, ledger, relay, stores, the SQL door,
 * placement, telemetry, operations): that is `@factline/core/runtime`, imported by `@factline/workers` only
 * (docs/architecture.md, "Two entries"; `npm run check:architecture` counts both).
 */
export * as Naming from "./definitions/Naming.js"
export * as MessageDefinition from "./definitions/MessageDefinition.js"
export * as FactDefinition from "./definitions/FactDefinition.js"
export * as Personal from "./personal/Personal.js"
export * as Handler from "./definitions/Handler.js"
export * as Processor from "./definitions/Processor.js"
export * as Timer from "./definitions/Timer.js"
export * as Projection from "./definitions/Projection.js"
export * as Module from "./definitions/Module.js"
export * as Webhook from "./definitions/Webhook.js"
export * as Workflow from "./definitions/Workflow.js"
export * as PlatformFacts from "./definitions/PlatformFacts.js"
export { PermanentError, TransientError, type HandlerError } from "./failures/Failure.js"
export * as Failure from "./failures/Failure.js"
export * as Registry from "./registry/Registry.js"
export * as Producer from "./producing/Producer.js"
export * as PayloadStore from "./producing/PayloadStore.js"
