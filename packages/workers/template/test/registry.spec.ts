/// <reference types="vite/client" />
/**
 * The app's registry, built from src/modules.ts with every check the Worker runs at start-up (a listener of
 * a fact nobody emits, a fact type of two modules, two handlers for one type…), and every module under src/
 * registered: `npm test` fails with the registry's message before `wrangler dev` or a deploy would.
 *
 * A decider you give a snapshot (`snapshot: { schema, version }`) gets a spec of its own beside its other specs:
 * `DeciderSpec.checkSnapshot(decider, { history, recorded })` fails when `evolve` changed without a new
 * `snapshot.version` (docs: product-teams.md, "Decider snapshots").
 */
import { it } from "vitest"
import { RegistrySpec } from "@factline/core/testing"
import { modules } from "../src/modules.js"

it("the registry of src/modules.ts passes the Worker's start-up checks, and every module under src/ is in it", () => {
  RegistrySpec.check(modules, { sources: import.meta.glob("../src/*/**/*.ts", { eager: true }) })
})
