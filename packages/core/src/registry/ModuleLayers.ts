/**
 * The services of each module: its `layer` (`Module.make(name, { layer })`), built once per isolate with the
 * platform's runtime (this service is part of it) and provided to the module's handlers, deciders and
 * processors each time they run — a lookup by name, never a build per message.
 *
 * Each module's layer is built on its own, at startup. One that fails to build is logged once, naming the
 * module, and the code of that module fails permanently (`PermanentError` naming the module and the build
 * error: its messages are dead-lettered, to be replayed once a deploy fixes it); the other modules and the
 * HTTP edge run on. A module without a layer runs with no services of its own.
 *
 * It does not type-check requirements (`Module.make` does, at compile time) and runs no product code itself.
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type { Module } from "../definitions/Module.js"
import * as Failure from "../failures/Failure.js"

export interface Shape {
  /** Runs the code of handler, decider or processor `name` with its module's services. */
  readonly provide: <A, E>(name: string, effect: Effect.Effect<A, E, any>) => Effect.Effect<A, E | Failure.PermanentError>
}

/** A module's services once built, or why they could not be. */
type Built = { readonly _tag: "Built"; readonly context: Context.Context<never> } | { readonly _tag: "Broken"; readonly error: Failure.PermanentError }

const none: Built = { _tag: "Built", context: Context.empty() }

export class ModuleLayers extends Context.Service<ModuleLayers, Shape>()("@factline/core/ModuleLayers") {
  /** Builds the layers of `modules` in the layer's scope (released with the runtime); never fails. */
  static readonly layer = (modules: ReadonlyArray<Module>) => Layer.effect(ModuleLayers, build(modules))
}

const build = Effect.fnUntraced(function*(modules: ReadonlyArray<Module>) {
  const byName = new Map<string, Built>()
  for (const module of modules) {
    let built: Built = none
    if (module.layer !== undefined) {
      const exit = yield* Effect.exit(Layer.build(module.layer))
      if (Exit.isSuccess(exit)) built = { _tag: "Built", context: exit.value }
      else {
        const message = `module ${module.name}: its layer failed to build (${Failure.describe(Cause.squash(exit.cause))}); its handlers and processors fail until a deploy fixes it`
        yield* Effect.logError(message, exit.cause)
        built = { _tag: "Broken", error: new Failure.PermanentError({ message }) }
      }
    }
    for (const code of [...module.handlers, ...module.processors, ...module.workflows]) byName.set(code.name, built)
  }
  return ModuleLayers.of({
    provide: <A, E>(name: string, effect: Effect.Effect<A, E, any>) => {
      const built = byName.get(name) ?? none
      return built._tag === "Broken" ? Effect.fail(built.error) : (Effect.provideContext(effect, built.context) as Effect.Effect<A, E>)
    }
  })
})

