/**
 * `@factline/core/definitions` — what product teams write, and nothing of the runtime: message and fact
 * definitions, handlers and deciders, processors, projections, webhooks, modules. No Cloudflare types and
 * no bindings, so a module of definitions can be shared with services outside Workers (the typed client,
 * `@factline/client`, checks emits and types reads with them) and bundled for a browser.
 */
export * as Naming from "./Naming.js"
export * as MessageDefinition from "./MessageDefinition.js"
export * as FactDefinition from "./FactDefinition.js"
export * as Handler from "./Handler.js"
export * as Processor from "./Processor.js"
export * as Timer from "./Timer.js"
export * as Projection from "./Projection.js"
export * as Module from "./Module.js"
export * as Webhook from "./Webhook.js"
export * as Workflow from "./Workflow.js"
export * as PlatformFacts from "./PlatformFacts.js"
export { PermanentError, TransientError, type HandlerError } from "../failures/Failure.js"
