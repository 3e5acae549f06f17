/**
 * The specs `factline new:module` writes for a module (new-module.ts): its examples (HandlerSpec, ProcessorSpec,
 * ProjectionSpec, and WorkflowSpec with --workflow) and its property spec (PropertySpec: every handler, decider
 * and processor fed inputs drawn from their schemas, so a throw on some input fails `npm test`).
 */

export function propertySpecSource(name: string, pascal: string, camel: string) {
  return `/**
 * The ${name} module fed inputs drawn from its schemas (\`npm run test:specs\`): every handler, decider and
 * processor answers with facts it declares, valid, or a typed failure (PermanentError, TransientError) —
 * never a throw —, and the module's projections map every fact they answer with. A failure names the code,
 * the input (shrunk) and the line that threw. Same inputs on every run (a fixed seed); \`runs\` draws more.
 */
import { it } from "vitest"
import { PropertySpec } from "@factline/core/testing"
import { ${camel} } from "../src/${name}/${pascal}.js"

it("every handler and processor of ${name} answers drawn inputs with declared facts or a typed failure, never a throw", () =>
  PropertySpec.check(${camel}, { runs: 100 }))
`
}

export function specSource(name: string, pascal: string, camel: string, workflow: boolean) {
  return `/** The ${name} module's specs, in plain Node with the test kit (\`npm run test:specs\`). */
${workflow ? `import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { describe, expect, it } from "vitest"
import { HandlerSpec, ProcessorSpec, ProjectionSpec, WorkflowSpec, fact, message } from "@factline/core/testing"
import { ${camel}Projection, FollowedUp, followUp${pascal}, ${pascal}Received, Qualified, qualify${pascal}, Received, record${pascal} } from "../src/${name}/${pascal}.js"
import { ${pascal}Notifier } from "../src/${name}/Notifier.js"

/** A notifier in memory, in place of the module's: one notification per idempotency key, as a real API keeps them. */
const fakeNotifier = () => {
  const notified = new Map<string, string>()
  const layer = Layer.succeed(${pascal}Notifier, ${pascal}Notifier.of({
    followUpAfter: Duration.days(1),
    notify: (id, idempotencyKey) => Effect.sync(() => void notified.set(idempotencyKey, id))
  }))
  return { layer, notified }
}` : `import { describe, it } from "vitest"
import { HandlerSpec, ProcessorSpec, ProjectionSpec, fact, message } from "@factline/core/testing"
import { ${camel}Projection, ${pascal}Received, Qualified, qualify${pascal}, Received, record${pascal} } from "../src/${name}/${pascal}.js"`}

describe("${name}", () => {
  it("records a received ${name}", () =>
    HandlerSpec.for(record${pascal}).when(message(${pascal}Received, { id: "x1", score: 70 }, { subject: "x1" })).then([Received.make({ id: "x1", score: 70 })]))

  it("refuses a ${name} sent to another id's stream", () =>
    HandlerSpec.for(record${pascal}).when(message(${pascal}Received, { id: "x1", score: 70 }, { subject: "x2" })).thenFails("must be the id", { permanent: true }))

  it("qualifies a score of at least 50", () =>
    ProcessorSpec.for(qualify${pascal}).when(fact(Received, { id: "x1", score: 50 }, { stream: "x1" })).then([Qualified.make({ id: "x1", qualified: true })]))

  it("projects one row per id, whatever the order and duplicates", () =>
    ProjectionSpec.for(${camel}Projection)
      .given([
        fact(Received, { id: "x1", score: 70 }, { stream: "x1" }),
        fact(Qualified, { id: "x1", qualified: true }, { stream: "x1" }),
        fact(Received, { id: "x2", score: 10 }, { stream: "x2" })
      ])
      .then([
        { id: "x1", score: 70, qualified: true },
        { id: "x2", score: 10, qualified: null }
      ]))${workflow ? `

  // The spec also replays the body and attempts each step again by itself: a notification without its key fails it.
  it("follows up a qualified ${name}: notified once, followed up a day later", async () => {
    const notifier = fakeNotifier()
    await WorkflowSpec.for(followUp${pascal}, { layer: notifier.layer })
      .when(fact(Qualified, { id: "x1", qualified: true }, { stream: "x1" }))
      .then({
        steps: ["notify", "sleep/follow-up", "append/followed-up"],
        sleeps: [{ name: "follow-up", duration: "1 day" }],
        facts: [FollowedUp.make({ id: "x1" })]
      })
    expect([...notifier.notified.values()]).toEqual(["x1"])
  })

  it("does not follow up a ${name} that did not qualify", () =>
    WorkflowSpec.for(followUp${pascal}, { layer: fakeNotifier().layer }).when(fact(Qualified, { id: "x1", qualified: false }, { stream: "x1" })).thenNotStarted())` : ""}
})
`
}
