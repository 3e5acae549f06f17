/** @factline/schemas — the message contract. Pure effect/Schema, no Cloudflare types. */
export * as Issues from "./Issues.js"
export * as TraceContext from "./TraceContext.js"
export * from "./Envelope.js"
export * from "./Fact.js"
export * from "./DeadLetter.js"
export * from "./QueueMessages.js"
