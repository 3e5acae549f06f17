/**
 * The CRM the crm-sync workflow writes to, as a module service: an HTTP API with contacts, deals and notes,
 * each call carrying the step's idempotency key (`Idempotency-Key`), so a retried call is one effect there.
 * Its base URL is `CRM_URL` (the tests and `npm run dev` start a local stand-in, scripts/CrmReceiver.mjs);
 * `CRM_DISPUTE_WINDOW` is how long a synced call waits for a dispute before its note (default 2 days).
 *
 * An answer of 429, 5xx or a network failure is a `TransientError` (the step is retried); any other 4xx is a
 * `PermanentError` naming the call and the CRM's answer (the step's result: the workflow compensates).
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { PermanentError, TransientError } from "@factline/core"

export interface Created {
  readonly id: string
}

export class CrmClient extends Context.Service<CrmClient, {
  readonly request: (method: "POST" | "DELETE", path: string, body: unknown, idempotencyKey: string) => Effect.Effect<Created, TransientError | PermanentError>
  /** How long a synced call waits for a dispute before its note is attached. */
  readonly disputeWindow: Duration.Duration
}>()("@factline/example/crm/CrmClient") {
  static readonly layer = Layer.effect(CrmClient, Effect.gen(function*() {
    const base: string = yield* Config.String("CRM_URL").pipe(Config.withDefault(""))
    const window = yield* Config.String("CRM_DISPUTE_WINDOW").pipe(Config.withDefault("2 days"))
    const disputeWindow = Duration.fromInputUnsafe(window as Duration.Input)
    return CrmClient.of({
      disputeWindow,
      request: (method, path, body, idempotencyKey) =>
        Effect.gen(function*() {
          if (base === "") return yield* new PermanentError({ message: "CRM_URL is not set: the crm module cannot reach its CRM" })
          const response = yield* Effect.tryPromise({
            try: () => fetch(`${base}${path}`, { method, headers: { "content-type": "application/json", "idempotency-key": idempotencyKey }, body: JSON.stringify(body) }),
            catch: (error) => new TransientError({ message: `CRM ${method} ${path}: ${error instanceof Error ? error.message : String(error)}` })
          })
          const text = yield* Effect.promise(() => response.text())
          if (response.status === 429 || response.status >= 500) return yield* new TransientError({ message: `CRM ${method} ${path} answered ${response.status}: ${text.slice(0, 200)}` })
          if (!response.ok) return yield* new PermanentError({ message: `CRM ${method} ${path} answered ${response.status}: ${text.slice(0, 200)}` })
          const parsed = text === "" ? {} : JSON.parse(text) as { id?: unknown }
          return { id: typeof parsed.id === "string" ? parsed.id : "" }
        })
    })
  }))
}
