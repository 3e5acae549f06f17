/**
 * @factline/core — the framework: registry and router, consumer runtime,
 * retry policies, ledger protocol, producer. Cloudflare bindings are reached
 * only through the services' live layers.
 */
export * as MessageDefinition from "./routing/MessageDefinition.js"
export * as Handler from "./routing/Handler.js"
export * as Module from "./routing/Module.js"
export * as Router from "./routing/Router.js"
export * as Dispatch from "./routing/Dispatch.js"
export * as EventsConsumer from "./routing/EventsConsumer.js"
export { PermanentError, TransientError, type HandlerError } from "./routing/HandlerError.js"
export * as RetryPolicy from "./consuming/RetryPolicy.js"
export * as Consumer from "./consuming/Consumer.js"
export * as Inbox from "./consuming/Inbox.js"
export * as DeadLetters from "./consuming/DeadLetters.js"
export * as DeadLetterConsumer from "./consuming/DeadLetterConsumer.js"
export * as FactDefinition from "./ledger/FactDefinition.js"
export * as FactId from "./ledger/FactId.js"
export * as Ledger from "./ledger/Ledger.js"
export * as LedgerProtocol from "./ledger/LedgerProtocol.js"
export * as LedgerStorage from "./ledger/LedgerStorage.js"
export * as Producer from "./producing/Producer.js"
export * as PayloadStore from "./producing/PayloadStore.js"
export * as SendBatches from "./producing/SendBatches.js"
export * as PlatformTables from "./tables/PlatformTables.js"
