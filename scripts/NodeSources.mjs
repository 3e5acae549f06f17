/**
 * `node --import ./scripts/NodeSources.mjs FILE`: the workspace's scripts run against its packages'
 * TypeScript sources, as the vitest configs do (WorkspaceSources.mjs), so `npm run factline` needs no
 * build. `@factline/*` resolves under the exports maps' `@factline/source` condition; Node (≥ 22.18) strips
 * the types, and a source's `./Module.js` import is found as `./Module.ts`. Published packages never see it:
 * their bin runs on dist/.
 */
import { registerHooks } from "node:module"

registerHooks({
  resolve(specifier, context, next) {
    if (specifier.startsWith("@factline/")) return next(specifier, { ...context, conditions: [...context.conditions, "@factline/source"] })
    try {
      return next(specifier, context)
    } catch (error) {
      if (specifier.startsWith(".") && specifier.endsWith(".js") && context.parentURL?.endsWith(".ts")) return next(`${specifier.slice(0, -3)}.ts`, context)
      throw error
    }
  }
})
