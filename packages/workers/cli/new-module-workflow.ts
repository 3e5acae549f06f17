/**
 * The workflow `factline new:module <name> --workflow` adds (new-module.ts): its source in the module file and
 * the notifier service it calls outside.
 */
export function workflowSource(name: string, pascal: string, kebab: string) {
  return `export const FollowedUp = FactDefinition.make("${name}_followed_up", Schema.Struct({ id: Id }))

/**
 * A workflow (on Cloudflare Workflows: each step durable, retried by the policy, its result kept once done): a
 * qualified ${name} is notified outside — one call, with its step's idempotency key, so that a retried or
 * replayed step is one notification there —, then, after a durable sleep (nothing held meanwhile), followed
 * up. Its specs: WorkflowSpec (docs/testing.md#workflow-specs).
 */
export const followUp${pascal} = Workflow.make({
  name: "follow-up-${kebab}",
  start: Qualified,
  when: (fact) => fact.data.qualified,
  emits: [FollowedUp],
  run: (qualified, wf) =>
    Effect.gen(function*() {
      const notifier = yield* ${pascal}Notifier
      yield* Activity.make({
        name: "notify",
        error: Workflow.StepError,
        execute: Effect.flatMap(Activity.idempotencyKey("notify"), (key) => notifier.notify(qualified.data.id, key))
      })
      yield* DurableClock.sleep({ name: "follow-up", duration: notifier.followUpAfter })
      yield* wf.append("followed-up", [FollowedUp.make({ id: qualified.data.id })])
    })
})

`
}

export function notifierSource(name: string, pascal: string) {
  const setting = `${name.toUpperCase()}_FOLLOW_UP_AFTER`
  return `/**
 * What the ${name} module's workflow calls outside, as a module service. Scaffolded as a stand-in that logs:
 * replace \`notify\` with your API's client, and send \`idempotencyKey\` along (an \`Idempotency-Key\`
 * header) — it is the workflow step's, the same on every attempt and replay. A \`TransientError\` is retried
 * by the workflow's policy; a \`PermanentError\` is the step's final answer. \`${setting}\` (default
 * 1 day): how long the workflow sleeps before its follow-up.
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { PermanentError, TransientError } from "@factline/core"

export class ${pascal}Notifier extends Context.Service<${pascal}Notifier, {
  readonly notify: (id: string, idempotencyKey: string) => Effect.Effect<void, TransientError | PermanentError>
  /** How long after the notification the follow-up is recorded. */
  readonly followUpAfter: Duration.Duration
}>()("${name}/${pascal}Notifier") {
  static readonly layer = Layer.effect(${pascal}Notifier, Effect.gen(function*() {
    const after = yield* Config.String("${setting}").pipe(Config.withDefault("1 day"))
    return ${pascal}Notifier.of({
      followUpAfter: Duration.fromInputUnsafe(after as Duration.Input),
      notify: (id, idempotencyKey) => Effect.logInfo(\`${name} \${id} qualified: notify it here (idempotency key \${idempotencyKey})\`)
    })
  }))
}
`
}
